"""Example training scripts for ``codedag mutate``: small models on synthetic data, offline, CPU.

Each script is run as a program (``python mnist_cnn.py --epochs 2 --lr 0.01``), never imported by
codedag itself. They print one line per epoch and a final ``Test Accuracy: NN.NN%`` line.
"""
