// Eight-schools layout (J groups, no N): the group means theta_j ~ normal(mu, tau) with tau
// known, so the leave-one-group-out predictive is normal in closed form.
data {
  int<lower=1> J;
  vector[J] y;
  vector<lower=0>[J] sigma;
  real<lower=0> tau;
}
parameters {
  real mu;
  vector[J] theta_raw;
}
transformed parameters {
  vector[J] theta = mu + tau * theta_raw;
}
model {
  mu ~ normal(0, 5);
  theta_raw ~ std_normal();
  y ~ normal(theta, sigma);
}
generated quantities {
  vector[J] log_lik;
  for (j in 1:J) log_lik[j] = normal_lpdf(y[j] | theta[j], sigma[j]);
}
