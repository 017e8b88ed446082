"""gluon.Parameter, Constant and ParameterDict (MXNet 1.9.1's behaviour).

Expected messages are MXNet 1.9.1's (printed by it for the same calls); values are closed
forms (gradients of sums of products)."""
import warnings

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd
from fastgrad.gluon import Parameter, Constant, ParameterDict, DeferredInitializationError


@pytest.fixture
def np_mode():
    mx.npx.set_np()
    yield
    mx.npx.reset_np()


def test_repr_shape_and_defaults():
    p = Parameter('fc_weight', shape=(2, 3))
    assert repr(p) == "Parameter fc_weight (shape=(2, 3), dtype=<class 'numpy.float32'>)"
    assert (p.grad_req, p.lr_mult, p.wd_mult, p.init) == ('write', 1.0, 1.0, None)
    assert Parameter('b', shape=4).shape == (4,)
    assert Parameter('x').shape is None


def test_unknown_dims_are_0_or_minus_1_under_set_np(np_mode):
    # MXNet 1.9.1 shows unknown dims as -1 after npx.set_np() (fixture: np_shape_deferred)
    p = Parameter('w', shape=(4, 0))
    assert p.shape == (4, -1)
    p.shape = (4, 7)
    assert p.shape == (4, 7)


def test_shape_setter_fills_unknown_dims_only():
    p = Parameter('q', shape=(2, 0))
    p.shape = (2, 5)
    assert p.shape == (2, 5)
    with pytest.raises(AssertionError, match="Parameter 'q': expected shape .3, 4. is "
                                             "incompatible with given shape .2, 5."):
        p.shape = (3, 4)
    with pytest.raises(AssertionError, match="incompatible"):
        p.shape = (2, 5, 1)


def test_data_before_initialize_raises_mxnet_message():
    p = Parameter('dense0_weight', shape=(2,))
    with pytest.raises(RuntimeError, match=r"^Parameter 'dense0_weight' has not been "
                                           r"initialized. Note that you should initialize"):
        p.data()
    with pytest.raises(RuntimeError, match="has not been initialized"):
        p.list_data()
    with pytest.raises(RuntimeError, match="Parameter 'dense0_weight' has not been initialized"):
        p.list_ctx()


def test_initialize_with_init_and_default_uniform():
    p = Parameter('w', shape=(50, 40))
    p.initialize()
    values = p.data().asnumpy()
    assert isinstance(p.data(), mx.nd.NDArray)
    assert values.dtype == onp.float32 and values.shape == (50, 40)
    # the default initializer is Uniform(0.07): values fill [-0.07, 0.07)
    assert values.min() >= -0.07 and values.max() <= 0.07 and values.std() > 0.03
    q = Parameter('w', shape=(2, 2), init=mx.init.Constant(3.0))
    q.initialize(init=mx.init.One())     # the argument overrides the parameter's own init
    onp.testing.assert_array_equal(q.data().asnumpy(), onp.ones((2, 2)))
    r = Parameter('w', shape=(2, 2), init=mx.init.Constant(3.0))
    r.initialize(default_init=mx.init.One())   # own init beats the default
    onp.testing.assert_array_equal(r.data().asnumpy(), onp.full((2, 2), 3.0))


def test_initialize_twice_warns_and_force_reinit_reinitializes():
    p = Parameter('w', shape=(2, 2), init=mx.init.One())
    p.initialize()
    first = p.data()
    with pytest.warns(UserWarning, match=r"Parameter 'w' is already initialized, ignoring. "
                                         r"Set force_reinit=True to re-initialize."):
        p.initialize(init=mx.init.Zero())
    assert p.data() is first and first.asnumpy().sum() == 4
    p.initialize(init=mx.init.Zero(), force_reinit=True)
    assert p.data().asnumpy().sum() == 0


def test_unknown_shape_without_deferral_raises():
    with pytest.raises(ValueError, match=r"Cannot initialize Parameter 'q' because it has "
                                         r"invalid shape: \(2, 0\)."):
        Parameter('q', shape=(2, 0)).initialize()


def test_deferred_initialization_waits_for_the_shape():
    p = Parameter('w', shape=(3, 0), allow_deferred_init=True, init=mx.init.One())
    p.initialize()
    with pytest.raises(DeferredInitializationError, match="initialization was deferred"):
        p.data()
    assert p.list_ctx() == [mx.cpu()]
    p.shape = (3, 2)
    p._finish_deferred_init()
    onp.testing.assert_array_equal(p.data().asnumpy(), onp.ones((3, 2)))


def test_set_data_on_deferred_parameter_is_used_at_initialisation():
    p = Parameter('w', shape=(0,), allow_deferred_init=True)
    p.initialize()
    p.set_data(mx.nd.array([1.0, 2.0, 3.0]))
    p._finish_deferred_init()
    onp.testing.assert_array_equal(p.data().asnumpy(), [1, 2, 3])


def test_set_data_writes_in_place_and_checks_shape():
    p = Parameter('w', shape=(2,))
    p.initialize()
    arr = p.data()
    p.set_data(mx.nd.array([5.0, 6.0]))
    assert p.data() is arr
    onp.testing.assert_array_equal(arr.asnumpy(), [5, 6])
    with pytest.raises(AssertionError, match="Parameter 'w': expected shape"):
        p.set_data(mx.nd.ones((3,)))
    with pytest.raises(AssertionError, match="Parameter 'z' has not been initialized"):
        Parameter('z', shape=(2,)).set_data(mx.nd.ones((2,)))


def _sum_of_products(p, x):
    with autograd.record():
        loss = (p.data() * x).sum()
    loss.backward()


def test_grad_write_and_add():
    x = mx.nd.array([[1.0, 2.0], [3.0, 4.0]])
    p = Parameter('w', shape=(2, 2))
    p.initialize()
    for _ in range(2):
        _sum_of_products(p, x)
    # d/dw sum(w * x) = x, overwritten by each pass
    onp.testing.assert_array_equal(p.grad().asnumpy(), x.asnumpy())
    p.grad_req = 'add'
    for _ in range(2):
        _sum_of_products(p, x)
    onp.testing.assert_array_equal(p.grad().asnumpy(), 2 * x.asnumpy())
    assert p.list_grad()[0] is p.grad()
    p.zero_grad()
    assert p.grad().asnumpy().sum() == 0


def test_grad_req_null_before_and_after_initialisation():
    p = Parameter('w', shape=(2,), grad_req='null')
    p.initialize()
    with pytest.raises(RuntimeError, match=r"Cannot get gradient array for Parameter 'w' "
                                           r"because grad_req='null'"):
        p.grad()
    p.zero_grad()           # nothing to zero: no error (MXNet)
    p.grad_req = 'write'
    _sum_of_products(p, mx.nd.array([3.0, 4.0]))
    onp.testing.assert_array_equal(p.grad().asnumpy(), [3, 4])
    p.grad_req = 'null'
    with pytest.raises(RuntimeError, match="grad_req='null'"):
        p.list_grad()
    with autograd.record():
        loss = (p.data() * 2).sum()
    assert p.data().grad is None and loss.shape == (1,)


def test_grad_req_validation_and_non_differentiable():
    with pytest.raises(AssertionError, match="grad_req must be one of 'write', 'add', or "
                                             "'null', but got 'foo'"):
        Parameter('w', grad_req='foo')
    assert Parameter('w', differentiable=False).grad_req == 'null'
    p = Parameter('w', shape=(1,), differentiable=False)
    p.grad_req = 'write'
    assert p.grad_req == 'null'
    with pytest.raises(AssertionError, match="grad_stype for Parameter 's' must be one of"):
        Parameter('s', grad_stype='foo')
    with pytest.raises(ValueError, match="dense"):
        Parameter('s', stype='row_sparse')
    sparse_grad = Parameter('e', shape=(3, 2), grad_stype='row_sparse')  # a dense gradient
    sparse_grad.initialize()
    _sum_of_products(sparse_grad, mx.nd.ones((3, 2)))
    assert sparse_grad.grad().asnumpy().tolist() == [[1, 1]] * 3
    assert list(sparse_grad._grad[0].asnumpy().ravel()) == [1] * 6


def test_contexts_are_the_cpu():
    p = Parameter('w', shape=(2,))
    p.initialize(ctx=[mx.cpu(0)])
    assert p.data(mx.cpu(3)) is p.data()
    assert p.list_ctx() == [mx.cpu(0)] and p.list_data() == [p.data()]
    with pytest.raises(ValueError, match="CPU only: cannot place an array on gpu"):
        p.data(mx.gpu(0))
    p.reset_ctx(mx.cpu(1))
    assert p.list_ctx() == [mx.cpu(1)]
    with pytest.raises(ValueError, match=r"Cannot reset context for Parameter 'z' because it "
                                         r"has not been initialized."):
        Parameter('z', shape=(1,)).reset_ctx(mx.cpu())


def test_cast_changes_data_and_grad_dtype():
    p = Parameter('w', shape=(2,), init=mx.init.One())
    p.initialize()
    p.cast('float64')
    assert p.dtype == 'float64'
    assert p.data().dtype == onp.float64
    _sum_of_products(p, mx.nd.array([0.5, 0.25], dtype='float64'))
    assert p.grad().dtype == onp.float64
    onp.testing.assert_array_equal(p.grad().asnumpy(), [0.5, 0.25])
    p.dtype = 'float16'
    assert p.data().dtype == onp.float16 and p.data().asnumpy().tolist() == [1.0, 1.0]


def test_var_carries_the_attributes():
    v = Parameter('fc_weight', shape=(2, 3), lr_mult=2.0, init=mx.init.Xavier()).var()
    attrs = v.list_attr()
    # MXNet 1.9.1 prints these attributes for the same call
    assert v.name == 'fc_weight'
    assert attrs['__shape__'] == '(2, 3)' and attrs['__lr_mult__'] == '2.0'
    assert attrs['__wd_mult__'] == '1.0'
    assert attrs['__init__'] == ('["xavier", {"rnd_type": "uniform", "factor_type": "avg", '
                                 '"magnitude": 3}]')


def test_constant():
    c = Constant('c', [[1, 2], [3, 4]])
    assert repr(c) == "Constant c (shape=(2, 2), dtype=<class 'numpy.float32'>)"
    assert c.grad_req == 'null'
    with pytest.warns(UserWarning, match='Constant parameter "c" does not support grad_req '
                                         'other than "null", and new value "write" is ignored.'):
        c.grad_req = 'write'
    assert c.grad_req == 'null'
    c.initialize()
    onp.testing.assert_array_equal(c.data().asnumpy(), [[1, 2], [3, 4]])
    c.set_data(mx.nd.array([[0, 0], [0, 1]]))
    assert c.data().asnumpy().sum() == 1
    c64 = Constant('d', mx.nd.array([1.5], dtype='float64'))
    c64.initialize(default_init=mx.init.Zero())     # its own init beats the default (MXNet)
    assert c64.data().dtype == onp.float64 and c64.data().asnumpy().tolist() == [1.5]
    c64.initialize(init=mx.init.Zero(), force_reinit=True)   # an explicit init wins (MXNet)
    assert c64.data().asnumpy().tolist() == [0.0]


def test_parameter_dict_get_creates_and_retrieves():
    pd = ParameterDict('net_')
    w = pd.get('weight', shape=(3, 0))
    assert w.name == 'net_weight' and pd['net_weight'] is w
    assert pd.get('weight', shape=(0, 4)) is w and w.shape == (3, 4)   # unknown dims merge
    assert pd.get('weight', dtype='float32') is w
    with pytest.raises(AssertionError, match=(
            r"^Cannot retrieve Parameter 'net_weight' because desired attribute does not "
            r"match with stored for attribute 'shape': desired '\(2, 4\)' vs stored "
            r"'\(3, 4\)'.$")):
        pd.get('weight', shape=(2, 4))
    with pytest.raises(AssertionError, match="attribute 'lr_mult': desired '2.0' vs stored "
                                             "'1.0'"):
        pd.get('weight', lr_mult=2.0)
    assert len(pd) == 1 and 'net_weight' in pd and list(pd) == ['net_weight']
    assert list(pd.keys()) == ['net_weight'] and list(pd.values()) == [w]
    assert pd.prefix == 'net_'


def test_parameter_dict_constants_and_repr():
    pd = ParameterDict('net_')
    pd.get('weight', shape=(3, 4))
    with pytest.raises(KeyError, match="No constant named 'net_c'. Please specify value if "
                                       "you want to create a new constant."):
        pd.get_constant('c')
    c = pd.get_constant('c', [[1, 2], [3, 4]])
    assert pd.get_constant('c', [[1, 2], [3, 4]]) is c
    with pytest.raises(AssertionError, match="Constant 'net_c' already exists but it's value "
                                             "doesn't match new value"):
        pd.get_constant('c', [[1, 2], [3, 5]])
    with pytest.raises(AssertionError, match="Parameter 'net_weight' already exists but it is "
                                             "not a constant."):
        pd.get_constant('weight', [[1]])
    # MXNet 1.9.1's repr of the same dict
    assert repr(pd) == ("net_ (\n"
                        "  Parameter net_weight (shape=(3, 4), dtype=<class 'numpy.float32'>)\n"
                        "  Constant net_c (shape=(2, 2), dtype=<class 'numpy.float32'>)\n"
                        ")")
    assert repr(ParameterDict()) == "(\n\n)"


def test_parameter_dict_shared_update_setattr_select():
    base = ParameterDict('a_')
    w = base.get('weight', shape=(2,))
    other = ParameterDict('a_', shared=base)
    assert other.get('weight') is w
    mine = ParameterDict('b_')
    mine.get('weight', shape=(2,))
    mine.update(base)
    assert list(mine.keys()) == ['b_weight', 'a_weight']
    clash = ParameterDict('a_')
    clash.get('weight', shape=(2,))
    with pytest.raises(AssertionError, match="different Parameters with the same name "
                                             "'a_weight'"):
        mine.update(clash)
    mine.setattr('grad_req', 'null')
    assert all(p.grad_req == 'null' for p in mine.values())
    mine.setattr('lr_mult', 0.5)
    assert all(p.lr_mult == 0.5 for p in mine.values())
    assert list(mine.select('a_.*').keys()) == ['a_weight']


def test_parameter_dict_initialize_zero_grad_and_ctx():
    pd = ParameterDict('n_')
    pd.get('w', shape=(2,))
    pd.get('b', shape=(2,), init=mx.init.One())
    pd.initialize(mx.init.Zero())
    assert pd['n_w'].data().asnumpy().tolist() == [0, 0]
    assert pd['n_b'].data().asnumpy().tolist() == [1, 1]
    for p in pd.values():
        _sum_of_products(p, mx.nd.array([2.0, 3.0]))
    pd.zero_grad()
    assert all(p.grad().asnumpy().sum() == 0 for p in pd.values())
    assert pd.list_ctx() == [mx.cpu()]
    pd.reset_ctx(mx.cpu(2))
    assert pd.list_ctx() == [mx.cpu(2)] and pd['n_b'].data().asnumpy().tolist() == [1, 1]


def test_parameter_dict_save_load_round_trip(tmp_path):
    pd = ParameterDict('net_')
    pd.get('weight', shape=(2, 3))
    pd.get('bias', shape=(2,))
    pd.initialize()
    path = str(tmp_path / 'p.params')
    pd.save(path, strip_prefix='net_')
    assert sorted(mx.nd.load(path).keys()) == ['bias', 'weight']
    other = ParameterDict('net_')
    other.get('weight', shape=(2, 0), allow_deferred_init=True)
    other.get('bias', shape=(2,))
    other.load(path, restore_prefix='net_')
    for name in ('net_weight', 'net_bias'):
        onp.testing.assert_array_equal(other[name].data().asnumpy(), pd[name].data().asnumpy())
    assert other['net_weight'].shape == (2, 3)
    with pytest.raises(ValueError, match="Prefix 'zz_' is to be striped before saving, but "
                                         "Parameter's name 'net_weight' does not start with "
                                         "'zz_'"):
        pd.save(path, strip_prefix='zz_')
    with pytest.raises(AssertionError, match="restore_prefix is 'zz_' but Parameters name "
                                             "'net_weight' does not start with 'zz_'"):
        other.load(path, restore_prefix='zz_')


def test_parameter_dict_load_missing_extra_and_dtype(tmp_path):
    path = str(tmp_path / 'p.params')
    mx.nd.save(path, {'w': mx.nd.ones((2,)), 'extra': mx.nd.ones((1,))})
    pd = ParameterDict()
    pd.get('w', shape=(2,))
    pd.get('v', shape=(2,))
    with pytest.raises(AssertionError, match=r"Parameter 'v' is missing in file: .*p.params, "
                                             r"which contains parameters: 'w', 'extra'"):
        pd.load(path)
    with pytest.raises(AssertionError, match=r"Parameter 'extra' loaded from file: .*p.params "
                                             r"is not present in ParameterDict, choices are: "
                                             r"'w', 'v'. Set ignore_extra to True to ignore."):
        pd.load(path, allow_missing=True)
    pd.load(path, allow_missing=True, ignore_extra=True)
    assert pd['w'].data().asnumpy().tolist() == [1, 1]
    with pytest.raises(RuntimeError, match="has not been initialized"):
        pd['v'].data()
    mx.nd.save(path, {'w': mx.nd.array([1.5, 2.5], dtype='float64')})
    with pytest.raises(AssertionError, match=r"Failed loading Parameter 'w' from saved params: "
                                             r"dtype incompatible expected .*float32.* vs saved "
                                             r"float64. Set cast_dtype=True"):
        pd.load(path, allow_missing=True)
    pd.load(path, allow_missing=True, cast_dtype=True)
    assert pd['w'].data().dtype == onp.float32
    pd.load(path, allow_missing=True, cast_dtype=True, dtype_source='saved')
    assert pd['w'].dtype == onp.float64 and pd['w'].data().dtype == onp.float64
    mx.nd.save(path, {'w': mx.nd.ones((3,))})
    with pytest.raises(AssertionError, match=r"Failed loading Parameter 'w' from saved params: "
                                             r"shape incompatible expected \(2,\) vs saved "
                                             r"\(3,\)"):
        pd.load(path, allow_missing=True)


def test_corrupt_file_raises(tmp_path):
    path = tmp_path / 'bad.params'
    path.write_bytes(b'not a params file')
    pd = ParameterDict()
    pd.get('w', shape=(2,))
    with pytest.raises(ValueError, match="bad.params: not a valid MXNet NDArray file"):
        pd.load(str(path))
    with pytest.raises(RuntimeError, match="has not been initialized"):
        pd['w'].data()                     # nothing half-loaded


def test_array_type_follows_set_np(np_mode):
    # MXNet 1.9.1 makes mx.np arrays after npx.set_np() (fixture: np_param_type)
    p = Parameter('w', shape=(2,))
    p.initialize()
    assert type(p.data()) is mx.np.ndarray and type(p.grad()) is mx.np.ndarray
    with autograd.record():
        loss = (p.data() * mx.np.array([1.0, 2.0])).sum()
    assert loss.shape == ()
    loss.backward()
    assert p.grad().asnumpy().tolist() == [1, 2]


def test_array_type_is_ndarray_without_set_np():
    p = Parameter('w', shape=(2,))
    p.initialize()
    assert type(p.data()) is mx.nd.NDArray
    assert p.data().sum().shape == (1,)


def test_initialisation_is_not_recorded():
    p = Parameter('w', shape=(2,), init=mx.init.One())
    with autograd.record():
        p.initialize()
    with autograd.record():
        loss = (p.data() * 3).sum()
    loss.backward()
    assert p.grad().asnumpy().tolist() == [3, 3]


def test_no_warning_on_first_initialisation():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        Parameter('w', shape=(1,)).initialize()


def test_row_sparse_access_raises_as_for_a_dense_parameter():
    p = Parameter('w', shape=(2, 2))
    p.initialize()
    with pytest.raises(RuntimeError, match="Cannot return a copy of Parameter w via "
                                           "row_sparse_data.. because its storage type is "
                                           "default. Please use data.. instead."):
        p.row_sparse_data(mx.nd.arange(0, 2))
    with pytest.raises(RuntimeError, match="list_row_sparse_data"):
        p.list_row_sparse_data(mx.nd.arange(0, 2))


def test_several_contexts_share_one_copy_whose_gradient_sums_the_shards():
    """Note [Parameters on several contexts]: one backward pass per context's shard adds up,
    as MXNet's Trainer sums its per-context copies' gradients."""
    p = Parameter('w', shape=(2,), init=mx.init.One())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    assert p.list_data() == [p.data()] and p.data(mx.cpu(1)) is p.data(mx.cpu(0))
    assert p.grad_req == 'write'
    x0, x1 = mx.nd.array([1.0, 2.0]), mx.nd.array([3.0, 5.0])
    for x in (x0, x1):                      # one pass per shard, as with split_and_load
        with autograd.record():
            loss = (p.data() * x).sum()
        loss.backward()
    assert p.grad().asnumpy().tolist() == [4, 7]
    p.zero_grad()
    with autograd.record():
        losses = [(p.data() * x0).sum(), (p.data() * x1).sum()]
    autograd.backward(losses)               # or one pass over both shards: the same sum
    assert p.grad().asnumpy().tolist() == [4, 7]
    p.reset_ctx(mx.cpu(0))                  # back on one context: 'write' overwrites again
    for x in (x0, x1):
        with autograd.record():
            loss = (p.data() * x).sum()
        loss.backward()
    assert p.grad().asnumpy().tolist() == [3, 5]


def test_integer_parameter_has_an_integer_gradient_buffer():
    # MXNet 1.9.1 gives an int32 parameter an int32 gradient of zeros
    p = Parameter('c', shape=(2,), dtype='int32', init=mx.init.One())
    p.initialize()
    assert p.grad().dtype == onp.int32 and p.grad().asnumpy().tolist() == [0, 0]


def test_reinitialising_on_a_gpu_raises_and_keeps_the_value():
    p = Parameter('w', shape=(2,), init=mx.init.One())
    p.initialize()
    with pytest.raises(ValueError, match="CPU only"):
        p.initialize(ctx=mx.gpu(0), force_reinit=True)
    assert p.data().asnumpy().tolist() == [1, 1]     # MXNet 1.9.1 loses it here
