// Censored observations: log_lik from lpdf or lccdf on an if / else branch.
data {
  int<lower=0> N;
  vector<lower=0>[N] t;
  array[N] int<lower=0, upper=1> censored;
}
parameters {
  real<lower=0> shape;
  real<lower=0> scale;
}
model {
  shape ~ gamma(2, 1);
  scale ~ gamma(2, 0.5);
  for (n in 1:N) {
    if (censored[n] == 1) target += weibull_lccdf(t[n] | shape, scale);
    else target += weibull_lpdf(t[n] | shape, scale);
  }
}
generated quantities {
  vector[N] log_lik;
  vector[N] t_rep;
  for (n in 1:N) {
    t_rep[n] = weibull_rng(shape, scale);
    if (censored[n] == 1) {
      log_lik[n] = weibull_lccdf(t[n] | shape, scale);
    } else if (censored[n] == 0) {
      log_lik[n] = weibull_lpdf(t[n] | shape, scale);
    } else {
      reject("censored must be 0 or 1");
    }
  }
}
