// A user function returns the whole log_lik vector; one vectorised assignment at declaration.
functions {
  vector pointwise_normal(vector y, vector mu, real sigma) {
    int n = rows(y);
    vector[n] out;
    for (i in 1:n) out[i] = normal_lpdf(y[i] | mu[i], sigma);
    return out;
  }
}
data {
  int<lower=0> N;
  int<lower=1> D;
  matrix[N, D] X;
  vector[N] y;
}
parameters {
  vector[D] beta;
  real<lower=0> sigma;
}
model {
  beta ~ normal(0, 1);
  sigma ~ exponential(1);
  y ~ normal(X * beta, sigma);
}
generated quantities {
  vector[N] log_lik = pointwise_normal(y, X * beta, sigma);
  vector[N] y_rep = to_vector(normal_rng(X * beta, sigma));
}
