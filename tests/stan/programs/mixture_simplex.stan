// A two-component mixture: log_mix over a simplex; generated quantities copy the weights into
// their own simplex (a constrained type that is no model-block local).
data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  simplex[2] w;
  ordered[2] mu;
  real<lower=0> sigma;
}
model {
  mu ~ normal(0, 3);
  sigma ~ lognormal(0, 0.5);
  for (n in 1:N) target += log_mix(w[1], normal_lpdf(y[n] | mu[1], sigma),
                                   normal_lpdf(y[n] | mu[2], sigma));
}
generated quantities {
  simplex[2] weights = w;
  vector[N] log_lik;
  array[N] int component;
  for (n in 1:N) {
    log_lik[n] = log_mix(weights[1], normal_lpdf(y[n] | mu[1], sigma),
                         normal_lpdf(y[n] | mu[2], sigma));
    component[n] = categorical_rng(weights);
  }
}
