// Two outcomes per observation: a normal and a Poisson sharing a latent slope; log_lik the sum.
data { int<lower=1> N; vector[N] x; vector[N] y1; array[N] int<lower=0> y2; }
parameters { real a1; real a2; real b; real<lower=0> sigma; }
model {
  a1 ~ normal(0, 2); a2 ~ normal(0, 2); b ~ normal(0, 1); sigma ~ exponential(1);
  y1 ~ normal(a1 + b * x, sigma);
  y2 ~ poisson_log(a2 + b * x);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N)
    log_lik[n] = normal_lpdf(y1[n] | a1 + b * x[n], sigma) + poisson_log_lpmf(y2[n] | a2 + b * x[n]);
}
