// Multivariate normal rows with an LKJ correlation: array[N] vector[K] y, one row per observation.
data { int<lower=1> N; int<lower=1> K; array[N] vector[K] y; }
parameters { vector[K] mu; cholesky_factor_corr[K] L; vector<lower=0>[K] tau; }
model {
  mu ~ normal(0, 5); L ~ lkj_corr_cholesky(2); tau ~ exponential(1);
  y ~ multi_normal_cholesky(mu, diag_pre_multiply(tau, L));
}
generated quantities {
  vector[N] log_lik;
  {
    matrix[K, K] LS = diag_pre_multiply(tau, L);
    for (n in 1:N) log_lik[n] = multi_normal_cholesky_lpdf(y[n] | mu, LS);
  }
}
