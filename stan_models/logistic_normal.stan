// Logistic regression with independent normal priors (bundled with loo_adapt).
// alpha ~ N(0, scale_icept), beta ~ N(0, prior_sd), y ~ bernoulli_logit(alpha + X * beta).
// mixis = 1 samples the Silva & Zanella (2023) mixture importance-sampling proposal
// instead of the posterior: target += log_sum_exp(-log_lik) (over mixis_rows
// only when mixis_n_rows > 0, 1-based: a focused mixture).
data {
  int<lower=1> N;
  int<lower=1> D;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
  real<lower=0> prior_sd;
  real<lower=0> scale_icept;
  int<lower=0, upper=1> mixis;
  int<lower=0> mixis_n_rows;
  array[mixis_n_rows] int<lower=1> mixis_rows;
}
parameters {
  real alpha;
  vector[D] beta;
}
model {
  vector[N] eta = alpha + X * beta;
  alpha ~ normal(0, scale_icept);
  beta ~ normal(0, prior_sd);
  if (mixis) {
    // The mixture proposal needs every pointwise term, not just their sum; with
    // mixis_n_rows > 0 it mixes only the leave-one-out posteriors of mixis_rows.
    vector[N] log_lik_local;
    for (n in 1:N) log_lik_local[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
    target += sum(log_lik_local);
    if (mixis_n_rows == 0) target += log_sum_exp(-log_lik_local);
    else target += log_sum_exp(-log_lik_local[mixis_rows]);
  } else {
    y ~ bernoulli_logit(eta);
  }
}
generated quantities {
  vector[N] log_lik;
  {
    vector[N] eta = alpha + X * beta;
    for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
  }
}
