// Zero-inflated Poisson: log_sum_exp in an if / else inside the loop, y_rep from a branch.
data { int<lower=1> N; vector[N] x; array[N] int<lower=0> y; }
parameters { real alpha; real beta; real<lower=0, upper=1> theta; }
model {
  alpha ~ normal(0, 2); beta ~ normal(0, 1); theta ~ beta(2, 2);
  for (n in 1:N) {
    if (y[n] == 0)
      target += log_sum_exp(log(theta), log1m(theta) + poisson_log_lpmf(0 | alpha + beta * x[n]));
    else
      target += log1m(theta) + poisson_log_lpmf(y[n] | alpha + beta * x[n]);
  }
}
generated quantities {
  vector[N] log_lik;
  array[N] int y_rep;
  for (n in 1:N) {
    real eta = alpha + beta * x[n];
    if (y[n] == 0)
      log_lik[n] = log_sum_exp(log(theta), log1m(theta) + poisson_log_lpmf(0 | eta));
    else
      log_lik[n] = log1m(theta) + poisson_log_lpmf(y[n] | eta);
    y_rep[n] = bernoulli_rng(theta) ? 0 : poisson_log_rng(eta);
  }
}
