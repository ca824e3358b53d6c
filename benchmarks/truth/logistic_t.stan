// Logistic regression with Student-t(3, 0, 1) priors on the coefficients (truth benchmark
// t_outliers): alpha ~ N(0, scale_icept), beta ~ student_t(nu, 0, prior_scale),
// y ~ bernoulli_logit(alpha + X * beta). Same parameter names as the bundled
// logistic_normal program. mixis = 1 samples the Silva & Zanella (2023) mixture
// importance-sampling proposal instead of the posterior: target += log_sum_exp(-log_lik).
data {
  int<lower=1> N;
  int<lower=1> D;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
  real<lower=0> nu;
  real<lower=0> prior_scale;
  real<lower=0> scale_icept;
  int<lower=0, upper=1> mixis;
}
parameters {
  real alpha;
  vector[D] beta;
}
model {
  vector[N] eta = alpha + X * beta;
  alpha ~ normal(0, scale_icept);
  beta ~ student_t(nu, 0, prior_scale);
  if (mixis) {
    // The mixture proposal needs every pointwise term, not just their sum.
    vector[N] ll;
    for (n in 1:N) ll[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
    target += sum(ll);
    target += log_sum_exp(-ll);
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
