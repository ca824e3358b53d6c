// A negative binomial (neg_binomial_2_log) regression with a dispersion parameter.
data { int<lower=1> N; vector[N] x; array[N] int<lower=0> y; }
parameters { real alpha; real beta; real<lower=0> phi; }
model {
  alpha ~ normal(0, 2); beta ~ normal(0, 1); phi ~ exponential(1);
  y ~ neg_binomial_2_log(alpha + beta * x, phi);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = neg_binomial_2_log_lpmf(y[n] | alpha + beta * x[n], phi);
}
