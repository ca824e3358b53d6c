// bernoulli_logit_glm in the model, and per observation in log_lik through a one-row slice
// X[n:n] and an array literal {y[n]}.
data { int<lower=1> N; int<lower=1> K; matrix[N, K] X; array[N] int<lower=0, upper=1> y; }
parameters { real alpha; vector[K] beta; }
model {
  alpha ~ normal(0, 2); beta ~ normal(0, 1);
  y ~ bernoulli_logit_glm(X, alpha, beta);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = bernoulli_logit_glm_lpmf({y[n]} | X[n:n], alpha, beta);
}
