// Grouped data, nested loops with a running index n += 1, y_rep in the same inner loop.
data {
  int<lower=1> J;
  array[J] int<lower=1> size;
  int<lower=0> N;
  vector[N] y;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] z;
  real<lower=0> sigma;
}
transformed parameters {
  vector[J] theta = mu + tau * z;
}
model {
  int n = 1;
  mu ~ normal(0, 5);
  tau ~ normal(0, 2);
  z ~ std_normal();
  sigma ~ normal(0, 2);
  for (j in 1:J) {
    for (k in 1:size[j]) {
      y[n] ~ normal(theta[j], sigma);
      n += 1;
    }
  }
}
generated quantities {
  vector[N] log_lik;
  vector[N] y_rep;
  {
    int n = 0;
    for (j in 1:J) {
      for (k in 1:size[j]) {
        n += 1;
        log_lik[n] = normal_lpdf(y[n] | theta[j], sigma);
        y_rep[n] = normal_rng(theta[j], sigma);
      }
    }
  }
}
