// A centred hierarchical model, log_lik per group (leave one group out): its funnel gives
// NUTS divergent transitions at the default adapt_delta.
data {
  int<lower=1> N;
  int<lower=1> J;
  array[N] int<lower=1, upper=J> g;
  vector[N] y;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] a;
}
model {
  mu ~ normal(0, 5);
  tau ~ normal(0, 2);
  a ~ normal(mu, tau);
  y ~ normal(a[g], 1);
}
generated quantities {
  vector[J] log_lik = rep_vector(0, J);
  for (n in 1:N) log_lik[g[n]] += normal_lpdf(y[n] | a[g[n]], 1);
}
