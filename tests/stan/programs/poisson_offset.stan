// A Poisson regression with an exposure offset from transformed data; log_lik and an int
// y_rep filled in one loop inside a local block of generated quantities.
data { int<lower=1> N; int<lower=1> K; matrix[N, K] X; vector<lower=0>[N] E; array[N] int<lower=0> y; }
transformed data { vector[N] log_E = log(E); }
parameters { real alpha; vector[K] beta; }
model {
  alpha ~ normal(0, 2); beta ~ normal(0, 1);
  y ~ poisson_log(log_E + alpha + X * beta);
}
generated quantities {
  vector[N] log_lik; array[N] int y_rep;
  {
    vector[N] eta = log_E + alpha + X * beta;
    for (n in 1:N) { log_lik[n] = poisson_log_lpmf(y[n] | eta[n]); y_rep[n] = poisson_log_rng(eta[n]); }
  }
}
