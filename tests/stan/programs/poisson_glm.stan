// poisson_log_glm in the model block; log_lik per row from a row of the matrix.
data { int<lower=1> N; int<lower=1> K; matrix[N, K] X; array[N] int<lower=0> y; }
parameters { real alpha; vector[K] beta; }
model {
  alpha ~ normal(0, 2); beta ~ normal(0, 1);
  y ~ poisson_log_glm(X, alpha, beta);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = poisson_log_lpmf(y[n] | alpha + X[n] * beta);
}
