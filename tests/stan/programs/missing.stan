// Missing outcomes as parameters (not per observation); log_lik over the observed ones, counted
// by N_obs.
data { int<lower=0> N_obs; int<lower=0> N_mis; vector[N_obs] y_obs; }
parameters { real mu; real<lower=0> sigma; vector[N_mis] y_mis; }
model {
  mu ~ normal(0, 5); sigma ~ exponential(1);
  y_obs ~ normal(mu, sigma);
  y_mis ~ normal(mu, sigma);
}
generated quantities {
  vector[N_obs] log_lik;
  for (n in 1:N_obs) log_lik[n] = normal_lpdf(y_obs[n] | mu, sigma);
}
