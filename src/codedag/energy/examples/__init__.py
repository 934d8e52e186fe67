"""Example training scripts for ``codedag mutate``: small models on synthetic data, offline, CPU.

Each script is run as a program (``python mnist_cnn.py --epochs 2 --lr 0.01``), never imported by
codedag itself. They print one line per epoch and a final ``Test Accuracy: NN.NN%`` line.

* :mod:`._common`: Shared parts of the example training scripts: arguments, synthetic data, the
  training loop
* :mod:`.mnist_cnn`: A small CNN on MNIST-shaped synthetic data (1x28x28, 10 classes)
* :mod:`.mnist_rnn`: A GRU that reads MNIST-shaped synthetic images row by row (28 steps of 28
  features)
* :mod:`.resnet_cifar`: A small ResNet (3 stages, one basic block each) on CIFAR-shaped synthetic
  data (3x32x32)
"""
