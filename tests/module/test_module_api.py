"""mx.mod.Module and BucketingModule: values of each step against closed forms, checkpoints,
optimizer states, KVStore rules, and the errors of bad input."""

import logging
import os

import numpy as np
import pytest

import fastgrad as mx


def linreg(num_hidden=1):
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=num_hidden, name="fc")
    return mx.sym.LinearRegressionOutput(fc, name="lro")


def mlp():
    data = mx.sym.var("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=6, name="fc1"),
                          act_type="tanh")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=3, name="fc2"),
                                name="softmax")


def bound_linreg(batch=4, dtype="float64", **bind):
    mod = mx.mod.Module(linreg(), label_names=["lro_label"])
    mod.bind([mx.io.DataDesc("data", (batch, 3), dtype)],
             [mx.io.DataDesc("lro_label", (batch,), dtype)], **bind)
    w = np.array([[0.5, -1.0, 2.0]])
    b = np.array([0.25])
    mod.init_params(arg_params={"fc_weight": mx.nd.array(w, dtype=dtype),
                                "fc_bias": mx.nd.array(b, dtype=dtype)})
    return mod, w, b


def batch_of(x, y, dtype="float64"):
    return mx.io.DataBatch([mx.nd.array(x, dtype=dtype)], [mx.nd.array(y, dtype=dtype)])


RNG = np.random.RandomState(0)
X = RNG.randn(4, 3)
Y = RNG.randn(4)


def test_one_sgd_step_is_the_closed_form():
    mod, w, b = bound_linreg()
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    mod.forward_backward(batch_of(X, Y))
    out = X @ w.T + b
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), out, rtol=1e-14)
    mod.update()
    residual = out[:, 0] - Y                       # LinearRegressionOutput's gradient
    lr = float(np.float32(0.1))                    # MXNet's update operators take float32
    w_new = w - lr * (residual @ X) / 4            # rescale_grad = 1 / batch size
    b_new = b - lr * residual.sum() / 4
    args, _ = mod.get_params()
    np.testing.assert_allclose(args["fc_weight"].asnumpy(), w_new, rtol=1e-14)
    np.testing.assert_allclose(args["fc_bias"].asnumpy(), b_new, rtol=1e-14)


def test_input_grads_and_grad_req_add():
    mod, w, b = bound_linreg(inputs_need_grad=True, grad_req="add")
    residual = (X @ w.T + b)[:, 0] - Y
    mod.forward_backward(batch_of(X, Y))
    mod.forward_backward(batch_of(X, Y))
    # grad_req applies to the data too (inputs_need_grad): both accumulate
    np.testing.assert_allclose(mod.get_input_grads()[0].asnumpy(),
                               2 * np.outer(residual, w[0]), rtol=1e-14)
    grads = mod._exec_group.execs[0].grad_dict
    np.testing.assert_allclose(grads["fc_weight"].asnumpy(), 2 * (residual @ X)[None],
                               rtol=1e-14)


def test_fixed_params_do_not_move():
    x = RNG.randn(16, 4)
    y = RNG.randint(0, 3, 16)
    mod = mx.mod.Module(mlp(), fixed_param_names=["fc1_weight"])
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=4), num_epoch=2,
            initializer=mx.init.Xavier(), optimizer_params={"learning_rate": 0.5})
    before = mod.get_params()[0]["fc1_weight"].asnumpy().copy()
    moved = mod.get_params()[0]["fc2_weight"].asnumpy().copy()
    with pytest.warns(UserWarning, match="init_params call ignored"):    # as MXNet
        mod.fit(mx.io.NDArrayIter(x, y, batch_size=4), num_epoch=1)
    args = mod.get_params()[0]
    np.testing.assert_array_equal(args["fc1_weight"].asnumpy(), before)
    assert np.abs(args["fc2_weight"].asnumpy() - moved).max() > 1e-4
    assert mod._exec_group.execs[0].grad_dict["fc1_weight"] is None


def test_fit_learns_a_separable_problem_and_scores_it():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.2], [0.2, 1.0]] * 5)
    y = np.array([0, 1, 0, 1] * 5)
    mod = mx.mod.Module(mlp())
    seen = []
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=4), num_epoch=30,
            initializer=mx.init.Xavier(), optimizer_params={"learning_rate": 0.5},
            batch_end_callback=lambda p: seen.append((p.epoch, p.nbatch)))
    assert seen[:6] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0)]
    assert mod.score(mx.io.NDArrayIter(x, y, batch_size=4), "acc") == [("accuracy", 1.0)]
    # score with num_batch reads only those batches
    metric = mx.metric.create("acc")
    mod.score(mx.io.NDArrayIter(x, y, batch_size=4), metric, num_batch=2)
    assert metric.num_inst == 8


def test_predict_removes_padding_and_reshapes_for_a_new_batch_size():
    mod, w, b = bound_linreg(batch=4, dtype="float32")
    x = RNG.randn(6, 3).astype(np.float32)
    expected = x @ w.T.astype(np.float32) + np.float32(b)
    out = mod.predict(mx.io.NDArrayIter(x, batch_size=4))       # batches of 4, pad 2
    assert out.shape == (6, 1)
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-6)
    pieces = list(mod.iter_predict(mx.io.NDArrayIter(x, batch_size=4)))
    assert [p[0][0].shape for p in pieces] == [(4, 1), (2, 1)]
    one = mod.predict(mx.nd.array(x[:3]))                      # a batch of 3: a reshape
    np.testing.assert_allclose(one.asnumpy(), expected[:3], rtol=1e-6)
    assert mod.data_shapes[0].shape == (3, 3)
    back = mod.predict(mx.nd.array(x[:4]))
    np.testing.assert_allclose(back.asnumpy(), expected[:4], rtol=1e-6)


def test_discard_free_last_batch_reshapes_during_fit():
    """A last batch smaller than the bound one (a DataIter without padding) trains on its
    own shape: the parameters equal a loop over the same batches by hand."""
    class Uneven(mx.io.DataIter):
        def __init__(self):
            super().__init__(4)
            self.provide_data = [mx.io.DataDesc("data", (4, 3), np.float64)]
            self.provide_label = [mx.io.DataDesc("lro_label", (4,), np.float64)]
            self.cut = [(0, 4), (4, 6)]
            self.i = 0

        def reset(self):
            self.i = 0

        def next(self):
            if self.i == len(self.cut):
                raise StopIteration
            lo, hi = self.cut[self.i]
            self.i += 1
            return batch_of(XX[lo:hi], YY[lo:hi])
    XX, YY = RNG.randn(6, 3), RNG.randn(6)
    mod = mx.mod.Module(linreg(), label_names=["lro_label"])
    w0 = {"fc_weight": mx.nd.array([[0.1, 0.2, 0.3]], dtype="float64"),
          "fc_bias": mx.nd.array([0.0], dtype="float64")}
    mod.fit(Uneven(), num_epoch=1, arg_params=w0, optimizer_params={"learning_rate": 0.1},
            eval_metric="mse")
    w, b = np.array([[0.1, 0.2, 0.3]]), np.array([0.0])
    lr = float(np.float32(0.1))
    for lo, hi in [(0, 4), (4, 6)]:
        residual = (XX[lo:hi] @ w.T + b)[:, 0] - YY[lo:hi]
        w = w - lr * (residual @ XX[lo:hi]) / 4       # rescale_grad stays 1/4, as MXNet
        b = b - lr * residual.sum() / 4
    np.testing.assert_allclose(mod.get_params()[0]["fc_weight"].asnumpy(), w, rtol=1e-13)


def test_checkpoint_round_trip_with_optimizer_states(tmp_path):
    x = RNG.randn(12, 4)
    y = RNG.randint(0, 3, 12)
    prefix = str(tmp_path / "net")
    opt = {"learning_rate": 0.2, "momentum": 0.9}
    init = mx.mod.Module(mlp())
    init.bind(mx.io.NDArrayIter(x, y, batch_size=4).provide_data,
              mx.io.NDArrayIter(x, y, batch_size=4).provide_label)
    init.init_params(mx.init.Xavier())
    start = {k: v.copy() for k, v in init.get_params()[0].items()}

    straight = mx.mod.Module(mlp())
    straight.fit(mx.io.NDArrayIter(x, y, batch_size=4), num_epoch=4, arg_params=start,
                 optimizer_params=opt)
    first = mx.mod.Module(mlp())
    first.fit(mx.io.NDArrayIter(x, y, batch_size=4), num_epoch=2, arg_params=start,
              optimizer_params=opt,
              epoch_end_callback=mx.callback.module_checkpoint(first, prefix, period=2,
                                                               save_optimizer_states=True))
    assert sorted(os.listdir(str(tmp_path))) == ["net-0002.params", "net-0002.states",
                                                 "net-symbol.json"]
    resumed = mx.mod.Module.load(prefix, 2, load_optimizer_states=True)
    with pytest.warns(UserWarning, match="init_params call ignored"):    # as MXNet
        resumed.fit(mx.io.NDArrayIter(x, y, batch_size=4), num_epoch=4, begin_epoch=2,
                    optimizer_params=opt)
    for k, v in straight.get_params()[0].items():
        np.testing.assert_allclose(resumed.get_params()[0][k].asnumpy(), v.asnumpy(),
                                   rtol=1e-6, atol=1e-7)
    saved = mx.nd.load(prefix + "-0002.params")
    assert sorted(saved) == ["arg:fc1_bias", "arg:fc1_weight", "arg:fc2_bias", "arg:fc2_weight"]


def test_kvstore_local_with_two_contexts_equals_one_device():
    x = RNG.randn(8, 4)
    y = RNG.randint(0, 3, 8).astype(np.float64)
    start = {"fc1_weight": RNG.randn(6, 4), "fc1_bias": np.zeros(6),
             "fc2_weight": RNG.randn(3, 6), "fc2_bias": np.zeros(3)}

    def train(context, kvstore):
        mod = mx.mod.Module(mlp(), context=context)
        mod.fit(mx.io.NDArrayIter(mx.nd.array(x, dtype="float64"),
                                  mx.nd.array(y, dtype="float64"), batch_size=4),
                num_epoch=2, kvstore=kvstore,
                arg_params={k: mx.nd.array(v, dtype="float64") for k, v in start.items()},
                optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
        return mod
    one = train(mx.cpu(), "local")
    two = train([mx.cpu(0), mx.cpu(1)], "local")
    assert one._kvstore is None and not one._update_on_kvstore      # MXNet's rules
    assert two._kvstore is not None and two._update_on_kvstore
    for k, v in one.get_params()[0].items():
        np.testing.assert_allclose(two.get_params()[0][k].asnumpy(), v.asnumpy(), rtol=1e-12)


def test_set_params_and_init_params_errors():
    mod = mx.mod.Module(linreg(), label_names=["lro_label"])
    mod.bind([("data", (2, 3))], [("lro_label", (2,))])
    with pytest.raises(RuntimeError, match="fc_bias is not presented"):
        mod.init_params(arg_params={"fc_weight": mx.nd.ones((1, 3))})
    mod.init_params(arg_params={"fc_bias": mx.nd.ones(1)}, allow_missing=True,
                    initializer=mx.init.Constant(0.5))
    assert mod.get_params()[0]["fc_weight"].asnumpy().tolist() == [[0.5, 0.5, 0.5]]
    with pytest.raises(ValueError, match=r"'fc_weight' has shape \(2, 3\) but the bound "
                                         r"symbol expects \(1, 3\)"):
        mod.set_params({"fc_weight": mx.nd.ones((2, 3)), "fc_bias": mx.nd.ones(1)}, {})
    # names the symbol does not have: ignored by init_params (as MXNet), refused by
    # set_params(allow_missing=True) without allow_extra (as MXNet)
    mod.set_params({"fc_weight": mx.nd.ones((1, 3)), "fc_bias": mx.nd.ones(1),
                    "other": mx.nd.ones(1)}, {})
    with pytest.raises(ValueError, match=r"'other' is not a parameter of the symbol"):
        mod.set_params({"other": mx.nd.ones(1)}, {}, allow_missing=True)
    mod.set_params({"other": mx.nd.ones(1)}, {}, allow_missing=True, allow_extra=True)
    with pytest.warns(UserWarning, match="init_params call ignored"):
        mod.init_params()


def test_calls_out_of_order_name_the_missing_step():
    mod = mx.mod.Module(linreg(), label_names=["lro_label"])
    batch = batch_of(X, Y, "float32")
    with pytest.raises(RuntimeError, match=r"Module.forward: the module is not bound; call "
                                           r"bind\(data_shapes"):
        mod.forward(batch)
    mod.bind([("data", (4, 3))], [("lro_label", (4,))])
    with pytest.raises(RuntimeError, match="parameters are not initialized; call init_params"):
        mod.forward(batch)
    mod.init_params()
    with pytest.raises(RuntimeError, match="Module.update: the optimizer is not initialized"):
        mod.update()
    with pytest.raises(RuntimeError, match="bind with inputs_need_grad=True"):
        mod.get_input_grads()
    with pytest.raises(ValueError, match="num_epoch is required"):
        mod.fit(mx.io.NDArrayIter(X, Y, batch_size=4, label_name="lro_label"))
    with pytest.raises(TypeError, match="train_data must be a DataIter"):
        mod.fit([X, Y], num_epoch=1)


def test_bad_batches_name_the_input_and_the_expected_shape():
    mod, _, _ = bound_linreg(dtype="float32")
    with pytest.raises(ValueError, match=r"cannot take the shapes .*'data': \(4, 5\)"):
        mod.forward(batch_of(np.ones((4, 5)), Y, "float32"))
    with pytest.raises(ValueError, match=r"the batch has no label but the module is bound "
                                         r"with label_shapes \[\('lro_label', \(4,\)\)\]"):
        mod.forward(mx.io.DataBatch([mx.nd.ones((4, 3))]), is_train=True)
    mod.forward(mx.io.DataBatch([mx.nd.ones((4, 3))]), is_train=False)   # predicting: fine
    with pytest.raises(ValueError, match=r"the batch has 2 data arrays but the module has "
                                         r"data_names \['data'\]"):
        mod.forward(mx.io.DataBatch([mx.nd.ones((4, 3)), mx.nd.ones((4, 3))]))
    with pytest.raises(ValueError, match=r"label 'lro_label' of the batch has shape \(3,\)"):
        mod.forward(mx.io.DataBatch([mx.nd.ones((4, 3))], [mx.nd.ones(3)]))


def test_bad_bind_arguments():
    with pytest.raises(ValueError, match=r"the input 'x' is not an argument of the symbol.*"
                                         r"did you mean one of \['data', 'lro_label'\]"):
        mx.mod.Module(linreg(), data_names=["x"])
    mod = mx.mod.Module(linreg(), label_names=["lro_label"])
    with pytest.raises(ValueError, match=r"data_shapes name \['dat'\] but the module's "
                                         r"data_names are \['data'\]"):
        mod.bind([("dat", (2, 3))])
    with pytest.raises(TypeError, match="the shape of 'data' in data_shapes must be a tuple"):
        mod.bind([("data", mx.nd.array([2, 3]))])
    assert not mod.binded
    with pytest.raises(ValueError, match="inputs_need_grad=True needs for_training=True"):
        mod.bind([("data", (2, 3))], for_training=False, inputs_need_grad=True)


def test_checkpoints_missing_truncated_or_foreign(tmp_path):
    prefix = str(tmp_path / "m")
    with pytest.raises(FileNotFoundError, match="no symbol file .*m-symbol.json"):
        mx.mod.Module.load(prefix, 1)
    mx.model.save_checkpoint(prefix, 1, linreg(), {"fc_weight": mx.nd.ones((1, 3)),
                                                   "fc_bias": mx.nd.ones(1)}, {})
    with pytest.raises(FileNotFoundError, match="no parameter file .*m-0002.params"):
        mx.model.load_checkpoint(prefix, 2)
    with open(prefix + "-0001.params", "rb") as f:
        whole = f.read()
    with open(prefix + "-0003.params", "wb") as f:
        f.write(whole[:len(whole) // 2])
    with pytest.raises(ValueError, match="m-0003.params"):
        mx.model.load_checkpoint(prefix, 3)
    # parameters of another symbol: the module names what it misses
    mx.model.save_checkpoint(prefix, 4, None, {"conv_weight": mx.nd.ones((2, 1, 3, 3))}, {})
    mod = mx.mod.Module.load(prefix, 4, label_names=["lro_label"])
    with pytest.raises(RuntimeError, match=r"have no value for \['fc_weight', 'fc_bias'\] of "
                                           r"the symbol; they hold \['conv_weight'\]"):
        mod.bind([("data", (2, 3))], [("lro_label", (2,))])
    assert not mod.binded
    # a Gluon file is not a checkpoint
    mx.nd.save(prefix + "-0005.params", {"weight": mx.nd.ones(1)})
    with pytest.raises(ValueError, match="the key 'weight' does not start with 'arg:'"):
        mx.model.load_checkpoint(prefix, 5)
    with pytest.raises(NotImplementedError, match="use mx.mod.Module"):
        mx.model.FeedForward(linreg())


def test_bucketing_module_shares_parameters_between_buckets(tmp_path):
    def sym_gen(length):
        data = mx.sym.var("data")
        weight = mx.sym.var("w", shape=(1,), init=mx.init.One())
        out = mx.sym.sum(mx.sym.broadcast_mul(data, weight), axis=1)
        return mx.sym.make_loss(out), ("data",), None

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=4)
    mod.bind(data_shapes=[("data", (2, 4))])
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 0.5, "rescale_grad": 1.0})

    def run(length, train=True):
        batch = mx.io.DataBatch([mx.nd.ones((2, length))], bucket_key=length,
                                provide_data=[mx.io.DataDesc("data", (2, length))])
        mod.forward(batch, is_train=train)
        if train:
            mod.backward()
            mod.update()
        return mod.get_outputs()[0].asnumpy()
    assert run(3, train=False).tolist() == [3.0, 3.0]
    run(3)                                  # dL/dw = 2 * 3 = 6: w = 1 - 0.5 * 6 = -2
    assert run(4, train=False).tolist() == [-8.0, -8.0]
    assert sorted(mod._buckets) == [3, 4]
    prefix = str(tmp_path / "b")
    mod.save_checkpoint(prefix, 1)
    loaded = mx.mod.BucketingModule.load(prefix, 1, sym_gen=sym_gen, default_bucket_key=4)
    loaded.bind(data_shapes=[("data", (2, 4))], for_training=False)
    loaded.forward(mx.io.DataBatch([mx.nd.ones((2, 4))], bucket_key=4))
    assert loaded.get_outputs()[0].asnumpy().tolist() == [-8.0, -8.0]


def test_unavailable_modules_name_the_alternative():
    with pytest.raises(NotImplementedError, match="PythonLossModule is not available.*"
                                                  "MakeLoss"):
        mx.mod.PythonLossModule()


def test_callbacks_log_as_mxnet(caplog, tmp_path):
    metric = mx.metric.create("acc")
    metric.update([mx.nd.array([0, 1])], [mx.nd.array([[0.9, 0.1], [0.2, 0.8]])])
    speed = mx.callback.Speedometer(batch_size=2, frequent=2)
    param = mx.model.BatchEndParam
    with caplog.at_level(logging.INFO):
        speed(param(epoch=0, nbatch=0, eval_metric=metric, locals=None))
        speed(param(epoch=0, nbatch=1, eval_metric=metric, locals=None))
        speed(param(epoch=0, nbatch=2, eval_metric=metric, locals=None))
        mx.callback.log_train_metric(1)(param(epoch=1, nbatch=3, eval_metric=metric,
                                              locals=None))
        mx.callback.ProgressBar(total=4, length=8)(param(1, 1, None, None))
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("Epoch[0] Batch [0-2]\tSpeed: ")
    assert lines[0].endswith(" samples/sec\taccuracy=1.000000")
    assert metric.num_inst == 0 and metric.global_num_inst == 2     # auto_reset: local only
    assert lines[1] == "Iter[1] Batch[3] Train-accuracy=nan"
    assert lines[2] == "[==------] 25%\r"
    callback = mx.callback.do_checkpoint(str(tmp_path / "c"), period=2)
    args = {"fc_weight": mx.nd.ones((1, 3)), "fc_bias": mx.nd.ones(1)}
    for epoch in range(4):
        callback(epoch, linreg(), args, {})
    assert sorted(os.listdir(str(tmp_path))) == ["c-0002.params", "c-0004.params",
                                                 "c-symbol.json"]


def test_monitor_reports_root_mean_squares(caplog):
    mod, w, b = bound_linreg(dtype="float32")
    mon = mx.monitor.Monitor(2, pattern="fc_.*|lro_output", sort=True)
    mod.install_monitor(mon)
    mod.init_optimizer()
    x = RNG.randn(4, 3).astype(np.float32)
    reports = []
    for step in range(3):
        mon.tic()
        mod.forward_backward(batch_of(x, np.zeros(4), "float32"))
        reports.append(mon.toc())
        mod.update()
    assert reports[1] == []                                        # every 2nd batch
    names = [name for _, name, _ in reports[0]]
    assert names == ["fc_bias", "fc_output", "fc_weight", "lro_output"]
    values = {name: float(text.strip()) for _, name, text in reports[0]}
    out = x @ w.T.astype(np.float32) + b.astype(np.float32)
    np.testing.assert_allclose(values["fc_weight"], np.sqrt(np.mean(w ** 2)), rtol=1e-6)
    np.testing.assert_allclose(values["fc_output"], np.sqrt(np.mean(out ** 2)), rtol=1e-5)
    assert [step for step, _, _ in reports[2]] == [3] * 4
    mon.tic()                                  # batch 3: not collected
    assert mon.toc() == []
    with caplog.at_level(logging.INFO):
        mon.tic()                              # batch 4: collected, reported as step 5
        mon.toc_print()
    assert caplog.records[0].getMessage().startswith("Batch:       5 fc_bias")


def test_sequential_module_trains_as_the_composed_symbol():
    data = mx.sym.var("data")
    body = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=5, name="fc1"),
                             act_type="tanh")
    head_in = mx.sym.var("data")
    head = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(head_in, num_hidden=1,
                                                               name="fc2"), name="lro")
    whole = mx.sym.LinearRegressionOutput(
        mx.sym.FullyConnected(body, num_hidden=1, name="fc2"), name="lro")
    x = RNG.randn(8, 3)
    y = RNG.randn(8)
    start = {"fc1_weight": RNG.randn(5, 3), "fc1_bias": RNG.randn(5),
             "fc2_weight": RNG.randn(1, 5), "fc2_bias": RNG.randn(1)}

    def params():
        return {k: mx.nd.array(v, dtype="float64") for k, v in start.items()}

    def data_iter():
        return mx.io.NDArrayIter(mx.nd.array(x, dtype="float64"),
                                 mx.nd.array(y, dtype="float64"), batch_size=4,
                                 label_name="lro_label")
    seq = mx.mod.SequentialModule()
    seq.add(mx.mod.Module(body, label_names=None))
    seq.add(mx.mod.Module(head, label_names=["lro_label"]), take_labels=True,
            auto_wiring=True)
    seq.fit(data_iter(), num_epoch=2, arg_params=params(), eval_metric="mse",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    one = mx.mod.Module(whole, label_names=["lro_label"])
    one.fit(data_iter(), num_epoch=2, arg_params=params(), eval_metric="mse",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    for k, v in one.get_params()[0].items():
        np.testing.assert_allclose(seq.get_params()[0][k].asnumpy(), v.asnumpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="unknown options"):
        seq.add(mx.mod.Module(head, label_names=["lro_label"]), take_label=True)


def test_module_refuses_a_gpu_context():
    with pytest.raises(ValueError, match=r"runs on the CPU only; context names \[gpu\(0\)\]"):
        mx.mod.Module(linreg(), context=[mx.gpu(0)])


def test_a_kvstore_object_on_one_device_updates_in_the_store_with_the_same_result():
    x = RNG.randn(8, 3)
    y = RNG.randn(8)
    start = {"fc_weight": RNG.randn(1, 3), "fc_bias": RNG.randn(1)}

    def train(kvstore):
        mod = mx.mod.Module(linreg(), label_names=["lro_label"])
        mod.fit(mx.io.NDArrayIter(mx.nd.array(x, dtype="float64"),
                                  mx.nd.array(y, dtype="float64"), batch_size=4,
                                  label_name="lro_label"),
                num_epoch=3, kvstore=kvstore, eval_metric="mse",
                arg_params={k: mx.nd.array(v, dtype="float64") for k, v in start.items()},
                optimizer="adam", optimizer_params={"learning_rate": 0.05})
        return mod
    plain = train("local")                     # one device: no store (MXNet's rule)
    stored = train(mx.kv.create("device"))     # a store given: the optimizer runs in it
    assert plain._kvstore is None and stored._update_on_kvstore
    for k, v in plain.get_params()[0].items():
        np.testing.assert_allclose(stored.get_params()[0][k].asnumpy(), v.asnumpy(),
                                   rtol=1e-13)


def test_state_inputs_are_set_and_not_trained():
    data, state = mx.sym.var("data"), mx.sym.var("state", shape=(3, 2))
    out = mx.sym.make_loss(mx.sym.FullyConnected(data, num_hidden=2, name="fc") * state)
    mod = mx.mod.Module(out, label_names=None, state_names=["state"])
    mod.bind([("data", (3, 4))])
    mod.init_params(mx.init.One())
    mod.set_states(value=2.0)
    mod.forward(mx.io.DataBatch([mx.nd.ones((3, 4))]), is_train=False)
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), np.full((3, 2), 8.0))
    assert mod._exec_group.execs[0].grad_dict["state"] is None
    mod.set_states(states=[mx.nd.zeros((3, 2))])
    assert mod.get_states()[0].asnumpy().sum() == 0
