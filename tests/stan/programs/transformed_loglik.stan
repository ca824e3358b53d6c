// log_lik as a transformed parameter the model block sums, y_rep in generated quantities
data {
  int<lower=1> N;
  int<lower=1> D;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  real alpha;
  vector[D] beta;
}
transformed parameters {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | alpha + X[n] * beta);
}
model {
  alpha ~ normal(0, 2.5);
  beta ~ normal(0, 1);
  target += sum(log_lik);
}
generated quantities {
  array[N] int y_rep;
  for (n in 1:N) y_rep[n] = bernoulli_logit_rng(alpha + X[n] * beta);
}
