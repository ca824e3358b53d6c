// The Stan User's Guide's QR reparameterisation of a linear regression (section 1.2), with
// log_lik and y_rep in one loop. stanli's interpreter has no qr_thin_Q: this program needs
// BridgeStan's compiled model for its log density, and CmdStan to sample.
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] x;
  vector[N] y;
}
transformed data {
  matrix[N, K] Q_ast = qr_thin_Q(x) * sqrt(N - 1);
  matrix[K, K] R_ast = qr_thin_R(x) / sqrt(N - 1);
  matrix[K, K] R_ast_inverse = inverse(R_ast);
}
parameters {
  real alpha;
  vector[K] theta;
  real<lower=0> sigma;
}
model {
  y ~ normal(Q_ast * theta + alpha, sigma);
}
generated quantities {
  vector[K] beta = R_ast_inverse * theta;
  vector[N] log_lik;
  vector[N] y_rep;
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(y[n] | Q_ast[n] * theta + alpha, sigma);
    y_rep[n] = normal_rng(Q_ast[n] * theta + alpha, sigma);
  }
}
