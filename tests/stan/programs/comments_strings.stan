/* A program whose comments and strings mention log_lik, _rng and braces {.
   log_lik[n] = normal_rng(0, 1); */
data {
  int<lower=0> N;
  vector[N] y;  // y_rep = normal_rng(...) { is not code
}
parameters {
  real mu;
  real<lower=0> sigma;
}
model {
  // the likelihood; log_lik below }
  mu ~ normal(0, 10);
  sigma ~ exponential(0.5);
  y ~ normal(mu, sigma);
}
generated quantities {
  vector[N] log_lik;  // pointwise; not from normal_rng
  vector[N] y_rep;
  for (n in 1:N) {
    /* log_lik[n] = normal_rng(mu, sigma); */
    log_lik[n] = normal_lpdf(y[n] | mu, sigma);  // "log_lik" {
    y_rep[n] = normal_rng(mu, sigma);
    if (n == 1) print("log_lik[1] = normal_rng(...); {", log_lik[n]);
  }
}
