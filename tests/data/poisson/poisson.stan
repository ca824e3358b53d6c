// Poisson regression with a log link (a model outside the bundled families).
data {
  int<lower=1> N;
  int<lower=1> K;
  matrix[N, K] x;
  array[N] int<lower=0> count;
}
parameters {
  real a;
  vector[K] b;
}
model {
  a ~ normal(0, 2);
  b ~ normal(0, 1);
  count ~ poisson_log(a + x * b);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = poisson_log_lpmf(count[n] | a + x[n] * b);
}
