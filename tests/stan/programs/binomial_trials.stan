// Aggregated binomial counts with their trials: y_rep from a vectorised _rng outside the loop,
// log_lik from a local linear predictor in a local block of generated quantities.
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  array[N] int<lower=0> trials;
  array[N] int<lower=0> y;
}
parameters {
  real alpha;
  vector[K] beta;
}
model {
  alpha ~ normal(0, 2);
  beta ~ normal(0, 1);
  y ~ binomial_logit(trials, alpha + X * beta);
}
generated quantities {
  vector[N] log_lik;
  array[N] int y_rep;
  {
    vector[N] eta = alpha + X * beta;
    y_rep = binomial_rng(trials, inv_logit(eta));
    for (n in 1:N) log_lik[n] = binomial_logit_lpmf(y[n] | trials[n], eta[n]);
  }
}
