// One predictor, log_lik and y_rep filled in one loop: tests/stan/test_own_program.py gives it
// a count far out (18 where about 2 is expected), whose leave-one-out posterior holds the
// whole full mixture.
data {
  int<lower=0> N;
  vector[N] x;
  array[N] int<lower=0> y;
}
parameters {
  real alpha;
  real beta;
}
model {
  alpha ~ normal(0, 2);
  beta ~ normal(0, 1);
  y ~ poisson_log(alpha + beta * x);
}
generated quantities {
  vector[N] log_lik;
  array[N] int y_rep;
  for (n in 1:N) {
    log_lik[n] = poisson_log_lpmf(y[n] | alpha + beta * x[n]);
    y_rep[n] = poisson_log_rng(alpha + beta * x[n]);
  }
}
