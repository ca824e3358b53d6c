// A local block whose linear predictor feeds both log_lik and y_rep (vectorised _rng).
data {
  int<lower=0> N;
  int<lower=1> D;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  real alpha;
  vector[D] beta;
}
model {
  vector[N] eta = alpha + X * beta;
  alpha ~ normal(0, 2.5);
  beta ~ std_normal();
  target += bernoulli_logit_lpmf(y | eta);
}
generated quantities {
  vector[N] log_lik;
  array[N] int y_rep;
  real mean_y_rep;
  {
    vector[N] eta = alpha + X * beta;
    y_rep = bernoulli_logit_rng(eta);
    for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
    mean_y_rep = mean(to_vector(y_rep));
  }
}
