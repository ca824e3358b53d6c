// Varying intercepts, non-centred by offset / multiplier; several observations per group (an
// observation's data can be dropped), log_lik and y_rep in one loop through a group index.
data {
  int<lower=1> N;
  int<lower=1> J;
  array[N] int<lower=1, upper=J> g;
  vector[N] y;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector<offset=mu, multiplier=tau>[J] alpha;
  real<lower=0> sigma;
}
model {
  mu ~ normal(0, 5);
  tau ~ normal(0, 2);
  alpha ~ normal(mu, tau);
  sigma ~ exponential(1);
  y ~ normal(alpha[g], sigma);
}
generated quantities {
  vector[N] log_lik;
  array[N] real y_rep;
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(y[n] | alpha[g[n]], sigma);
    y_rep[n] = normal_rng(alpha[g[n]], sigma);
  }
}
