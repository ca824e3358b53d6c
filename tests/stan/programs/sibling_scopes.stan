// Two sibling blocks declare eta: only the first feeds log_lik; the second draws from _rng.
// The model block has its own locals mu and n (the copy must not clash with them).
data {
  int<lower=0> N;
  vector[N] x;
  vector[N] y;
}
parameters {
  real a;
  real b;
  real<lower=0> sigma;
}
model {
  vector[N] mu = a + b * x;
  int n = N;
  a ~ normal(0, 2);
  b ~ normal(0, 2);
  sigma ~ lognormal(0, 1);
  y[1:n] ~ normal(mu[1:n], sigma);
}
generated quantities {
  vector[N] log_lik;
  vector[N] y_rep;
  vector[N] mu = a + b * x;
  {
    vector[N] eta = mu;
    for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | eta[n], sigma);
  }
  {
    vector[N] eta = to_vector(normal_rng(mu, sigma));
    y_rep = eta;
  }
}
