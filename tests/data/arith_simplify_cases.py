"""Expressions MegEngine's opt_level>=1 simplifies (or deliberately does not), each with
an input that makes the difference visible. `F` is megengine.functional or megtrace's."""
INF = float("inf")


def CASES(F):
    def y_over_y(x):
        y = 2.0 * x
        return y / y

    def y_minus_y(x):
        y = 2.0 * x
        return y - y

    def y_over_y_times_3(x):
        y = 2.0 * x
        return y / y * 3.0

    def log_exp_sum(x):
        return F.log(F.exp(x) + F.exp(2.0 * x))

    def log_exp_prod(x):
        return F.log(F.exp(x) * F.exp(x))

    def log_exp_div(x):
        return F.log(F.exp(x) / F.exp(2.0 * x))

    return {
        "y/y": (y_over_y, 0.0),
        "y-y": (y_minus_y, INF),
        "y/y*3": (y_over_y_times_3, 0.0),
        "x/x (an input: kept)": (lambda x: x / x, 0.0),
        "x-x (an input: kept)": (lambda x: x - x, INF),
        "x*0": (lambda x: x * 0.0, INF),
        "0*x": (lambda x: 0.0 * x, INF),
        "x+0": (lambda x: x + 0.0, -0.0),
        "log(exp(x))": (lambda x: F.log(F.exp(x)), 1e4),
        "exp(log(x)) (kept)": (lambda x: F.exp(F.log(x)), -1.0),
        "log(exp(x)+exp(2x))": (log_exp_sum, 1e4),
        "log(exp(x)*exp(x))": (log_exp_prod, 1e4),
        "log(exp(x)/exp(2x))": (log_exp_div, 1e4),
        "log(exp(x)-exp(2x)) (kept)": (lambda x: F.log(F.exp(x) - F.exp(2.0 * x)), -1e4),
        "log(1+x)": (lambda x: F.log(1 + x), 1e-10),
        "log(x+1)": (lambda x: F.log(x + 1), 1e-10),
        "exp(x)-1": (lambda x: F.exp(x) - 1, 1e-10),
        "-(-x)": (lambda x: -(-x), 1.0),
    }
