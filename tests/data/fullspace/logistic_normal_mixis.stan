// Fixture logistic_normal with an optional mixture-IS target (data flag mixis).
// Logistic regression with independent normal priors.
data {
  int<lower=1> N;
  int<lower=1> D;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
  real<lower=0> prior_sd;
  real<lower=0> scale_icept;
  int<lower=0, upper=1> mixis;  // 1: sample the mixture posterior of Silva & Zanella
}
parameters {
  real alpha;
  vector[D] beta;
}
model {
  alpha ~ normal(0, scale_icept);
  beta ~ normal(0, prior_sd);
  y ~ bernoulli_logit(alpha + X * beta);
  if (mixis) {
    vector[N] eta = alpha + X * beta;
    vector[N] ll;
    for (n in 1:N) ll[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
    target += log_sum_exp(-ll);
  }
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | alpha + X[n] * beta);
}
