// One-hidden-layer ReLU network (width H) for a binary outcome, Gaussian priors on all
// weights (bundled with loo_adapt): eta = max(X * W1 + b1', 0) * w2 + b2.
// mixis = 1 samples the Silva & Zanella (2023) mixture importance-sampling proposal
// instead of the posterior: target += log_sum_exp(-log_lik) (over mixis_rows
// only when mixis_n_rows > 0, 1-based: a focused mixture).
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=1> H;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
  real<lower=0> prior_sd;
  int<lower=0, upper=1> mixis;
  int<lower=0> mixis_n_rows;
  array[mixis_n_rows] int<lower=1> mixis_rows;
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
    vector[N] eta = fmax(X * W1 + rep_matrix(b1', N), 0) * w2 + b2;
    for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
  }
}
