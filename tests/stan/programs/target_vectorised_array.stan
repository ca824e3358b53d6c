// target += vectorised in the model, array[N] real log_lik filled element-wise.
data {
  int<lower=0> N;
  vector[N] x;
  array[N] int<lower=0> y;
  vector<lower=0>[N] exposure;
}
transformed data {
  vector[N] log_exposure = log(exposure);
}
parameters {
  real a;
  real b;
}
model {
  target += normal_lpdf(a | 0, 2) + normal_lpdf(b | 0, 1);
  target += poisson_log_lpmf(y | log_exposure + a + b * x);
}
generated quantities {
  array[N] real log_lik;
  array[N] int y_rep = poisson_log_rng(log_exposure + a + b * x);
  for (n in 1:N) log_lik[n] = poisson_log_lpmf(y[n] | log_exposure[n] + a + b * x[n]);
}
