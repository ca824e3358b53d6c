// Eight-schools style, non-centred; a multi-variable declaration and a quantity that reads
// log_lik afterwards (it stays behind); the declaration shares its type with a draw from _rng.
data {
  int<lower=0> J;
  array[J] real y;
  array[J] real<lower=0> sigma;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] eta;
}
transformed parameters {
  vector[J] theta = mu + tau * eta;
}
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  eta ~ std_normal();
  y ~ normal(theta, sigma);
}
generated quantities {
  real lo = normal_rng(0, 1), hi = 1;
  vector[J] log_lik;
  real total_ll;
  for (j in 1:J) log_lik[j] = normal_lpdf(y[j] | theta[j], sigma[j]) + 0 * hi;
  total_ll = sum(log_lik);
}
