// A while loop with a running index inside a profile block, a break, and a user _lpmf built on
// _lupmf that the model block calls through target +=.
functions {
  real counts_lpmf(int k, real log_rate) {
    return poisson_log_lupmf(k | log_rate);
  }
}
data {
  int<lower=0> N;
  array[N] int<lower=0> k;
}
parameters {
  real log_rate;
}
model {
  log_rate ~ normal(1, 1);
  for (n in 1:N) target += counts_lupmf(k[n] | log_rate);
}
generated quantities {
  vector[N] log_lik;
  int total_rep = 0;
  profile("pointwise") {
    int n = 1;
    while (1) {
      if (n > N) break;
      log_lik[n] = counts_lpmf(k[n] | log_rate);
      total_rep += poisson_log_rng(log_rate);
      n += 1;
    }
  }
}
