// the shape of the code brms writes: predictors centred on their means in transformed data,
// the intercept on the centred scale, one glm call in the model block; log_lik added by hand
data {
  int<lower=1> N;  // total number of observations
  vector[N] Y;  // response variable
  int<lower=1> K;  // number of population-level effects
  matrix[N, K] X;  // population-level design matrix
}
transformed data {
  int Kc = K;
  matrix[N, Kc] Xc;  // centered version of X
  vector[Kc] means_X;  // column means of X before centering
  for (i in 1:K) {
    means_X[i] = mean(X[, i]);
    Xc[, i] = X[, i] - means_X[i];
  }
}
parameters {
  vector[Kc] b;  // regression coefficients
  real Intercept;  // temporary intercept for centered predictors
  real<lower=0> sigma;  // dispersion parameter
}
model {
  target += normal_id_glm_lpdf(Y | Xc, Intercept, b, sigma);
  target += student_t_lpdf(Intercept | 3, 0, 2.5);
  target += normal_lpdf(b | 0, 5);
  target += student_t_lpdf(sigma | 3, 0, 2.5) - 1 * student_t_lccdf(0 | 3, 0, 2.5);
}
generated quantities {
  real b_Intercept = Intercept - dot_product(means_X, b);
  vector[N] log_lik;
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(Y[n] | Intercept + Xc[n] * b, sigma);
  }
}
