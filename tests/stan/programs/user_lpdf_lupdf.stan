// A user _lpdf built on _lupdf: the model block calls it as _lupdf, generated quantities as _lpdf.
functions {
  real skewed_lpdf(real y, real mu, real sigma, real a) {
    return normal_lupdf(y | mu, sigma) + normal_lcdf(a * (y - mu) / sigma | 0, 1) + log2();
  }
}
data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  real mu;
  real<lower=0> sigma;
  real a;
}
model {
  mu ~ normal(0, 5);
  sigma ~ lognormal(0, 1);
  a ~ normal(0, 2);
  for (n in 1:N) target += skewed_lupdf(y[n] | mu, sigma, a);
}
generated quantities {
  array[N] real log_lik;
  array[N] real y_rep;
  for (n in 1:N) {
    log_lik[n] = skewed_lpdf(y[n] | mu, sigma, a);
    y_rep[n] = normal_rng(mu, sigma);
  }
}
