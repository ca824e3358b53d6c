// An ordinal logistic regression: an ordered cut-point parameter, a sampling statement in a loop.
data { int<lower=1> N; int<lower=2> K; vector[N] x; array[N] int<lower=1, upper=K> y; }
parameters { real beta; ordered[K - 1] c; }
model {
  beta ~ normal(0, 2); c ~ normal(0, 3);
  for (n in 1:N) y[n] ~ ordered_logistic(beta * x[n], c);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = ordered_logistic_lpmf(y[n] | beta * x[n], c);
}
