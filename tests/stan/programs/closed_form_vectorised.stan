// log_lik in one vectorised closed-form assignment (no density function call).
data {
  int<lower=0> N;
  vector[N] x;
  array[N] int<lower=0, upper=1> y;
}
transformed data {
  vector[N] yv = to_vector(y);
}
parameters {
  real a;
  real b;
}
model {
  a ~ normal(0, 2);
  b ~ normal(0, 2);
  y ~ bernoulli_logit(a + b * x);
}
generated quantities {
  vector[N] log_lik;
  log_lik = yv .* log_inv_logit(a + b * x) + (1 - yv) .* log1m_inv_logit(a + b * x);
}
