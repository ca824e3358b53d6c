// Transformed data (centred, scaled predictors) and transformed parameters feed log_lik.
data {
  int<lower=0> N;
  int<lower=1> D;
  matrix[N, D] X;
  vector[N] y;
}
transformed data {
  matrix[N, D] Xc;
  for (d in 1:D) Xc[:, d] = (X[:, d] - mean(X[:, d])) / sd(X[:, d]);
  real y_mean = mean(y);
}
parameters {
  real alpha;
  vector[D] beta;
  real<lower=0> sigma;
}
transformed parameters {
  vector[N] mu = y_mean + alpha + Xc * beta;
}
model {
  alpha ~ normal(0, 1);
  beta ~ normal(0, 1);
  sigma ~ student_t(3, 0, 1);
  y ~ normal(mu, sigma);
}
generated quantities {
  vector[N] log_lik;
  vector[N] y_rep;
  for (n in 1:N) {
    y_rep[n] = normal_rng(mu[n], sigma);
    log_lik[n] = normal_lpdf(y[n] | mu[n], sigma);
  }
}
