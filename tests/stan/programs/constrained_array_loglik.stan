// log_lik declared as a constrained array, computed inside a local block.
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
model {
  alpha ~ normal(0, 2.5);
  beta ~ normal(0, 1);
  y ~ bernoulli_logit(alpha + X * beta);
}
generated quantities {
  array[N] real<upper=0> log_lik;
  {
    vector[N] eta = alpha + X * beta;
    for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
  }
}
