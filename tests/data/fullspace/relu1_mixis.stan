// Fixture relu1 with an optional mixture-IS target (data flag mixis).
// One-hidden-layer ReLU network for a binary outcome, Gaussian priors on all weights.
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=1> H;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
  real<lower=0> prior_sd;
  int<lower=0, upper=1> mixis;
}
parameters {
  matrix[D, H] W1;
  vector[H] b1;
  vector[H] w2;
  real b2;
}
model {
  vector[N] eta = fmax(X * W1 + rep_matrix(b1', N), 0) * w2 + b2;
  to_vector(W1) ~ normal(0, prior_sd);
  b1 ~ normal(0, prior_sd);
  w2 ~ normal(0, prior_sd);
  b2 ~ normal(0, prior_sd);
  y ~ bernoulli_logit(eta);
  if (mixis) {
    vector[N] ll;
    for (n in 1:N) ll[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
    target += log_sum_exp(-ll);
  }
}
generated quantities {
  vector[N] log_lik;
  {
    vector[N] eta = fmax(X * W1 + rep_matrix(b1', N), 0) * w2 + b2;
    for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
  }
}
