// No model block (improper flat prior on a bounded parameter) and log_lik as a row_vector.
data {
  int<lower=0> N;
  array[N] int<lower=0, upper=10> k;
}
parameters {
  real<lower=0, upper=1> p;
}
generated quantities {
  row_vector[N] log_lik;
  for (n in 1:N) log_lik[n] = binomial_lpmf(k[n] | 10, p);
}
