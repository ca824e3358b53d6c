// Logistic regression with a regularized horseshoe prior (Piironen & Vehtari 2017),
// non-centred (bundled with loo_adapt). has_intercept = 0 drops the intercept.
// mixis = 1 samples the Silva & Zanella (2023) mixture importance-sampling proposal
// instead of the posterior: target += log_sum_exp(-log_lik) (over mixis_rows
// only when mixis_n_rows > 0, 1-based: a focused mixture).
data {
  int<lower=1> N;
  int<lower=1> D;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
  int<lower=0, upper=1> has_intercept;
  real<lower=0> scale_icept;
  real<lower=0> scale_global;
  real<lower=1> nu_global;
  real<lower=1> nu_local;
  real<lower=0> slab_scale;
  real<lower=0> slab_df;
  int<lower=0, upper=1> mixis;
  int<lower=0> mixis_n_rows;
  array[mixis_n_rows] int<lower=1> mixis_rows;
}
parameters {
  array[has_intercept] real beta0;
  vector[D] z;
  real<lower=0> tau;
  vector<lower=0>[D] lambda;
  real<lower=0> caux;
}
transformed parameters {
  real<lower=0> c = slab_scale * sqrt(caux);
  vector<lower=0>[D] lambda_tilde = sqrt(c^2 * square(lambda) ./ (c^2 + tau^2 * square(lambda)));
  vector[D] beta = z .* lambda_tilde * tau;
}
model {
  vector[N] eta = X * beta;
  if (has_intercept) {
    eta += beta0[1];
    beta0[1] ~ normal(0, scale_icept);
  }
  z ~ std_normal();
  lambda ~ student_t(nu_local, 0, 1);
  tau ~ student_t(nu_global, 0, scale_global);
  caux ~ inv_gamma(0.5 * slab_df, 0.5 * slab_df);
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
    vector[N] eta = X * beta;
    if (has_intercept) eta += beta0[1];
    for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
  }
}
