// The issue's program: log_lik and y_rep filled in the same loop.
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
  alpha ~ normal(0, 2.5);
  beta ~ normal(0, 1);
  y ~ bernoulli_logit(alpha + X * beta);
}
generated quantities {
  vector[N] log_lik;
  array[N] int y_rep;
  for (n in 1:N) {
    log_lik[n] = bernoulli_logit_lpmf(y[n] | alpha + X[n] * beta);
    y_rep[n] = bernoulli_logit_rng(alpha + X[n] * beta);
  }
}
