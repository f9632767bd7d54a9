"""Competing-flow CCA estimator: sender-side capture, features, Random Forest models,
majority vote, online estimation."""
import os

#: The current model release, used wherever no --model is given; its card is models/README.md.
DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "cca_rf_int_qcut_hard.joblib")
#: The identification forest (--identify active: the passive features' forest as one stage of
#: the sequential test, estimator/identify/forest.py); its card is models/README.md.
DEFAULT_IDENTIFY_FOREST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "identify_forest.joblib")
