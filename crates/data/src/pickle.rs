//! Python pickles as teachers' score files hold them (`teacher.rs`): dicts, lists, tuples, ints,
//! floats, strings and bytes in any protocol (0–5), and NumPy's scalars and arrays, which a
//! pickle holds as calls (`GLOBAL` + `REDUCE`, `BUILD`) that this reader evaluates itself. Any
//! other call is refused, naming the Python callable and the byte it is at.
//!
//! Hand-written because no maintained reader keeps the arguments of a call it does not know:
//! serde-pickle makes it an unresolved global (or, keeping restore state, replaces a NumPy dtype
//! by its `BUILD` state, which no longer says float or int), and burn's pytorch-reader keeps
//! only the callable's name (`Object::Opaque`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::rc::Rc;

/// A container the pickle may mutate after it is memoized (`SETITEMS` fills a dict put in the
/// memo empty) and refer to again (`BINGET`): shared, as in Python.
pub type Shared<T> = Rc<RefCell<T>>;

/// A value read from a pickle. NumPy scalars are already their values ([`Value::Int`],
/// [`Value::Float`], [`Value::Bool`]); a NumPy array is [`Value::Array`].
#[derive(Clone, Debug)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    Tuple(Rc<[Value]>),
    List(Shared<Vec<Value>>),
    Dict(Shared<Vec<(Value, Value)>>),
    Array(Shared<Array>),
    /// A callable named by `GLOBAL` or `STACK_GLOBAL`: `module.name`.
    Global(Rc<str>),
    Dtype(Shared<Dtype>),
}

impl Drop for Value {
    /// Drops what this value alone holds one level at a time: a pickle of a million nested
    /// lists is a few megabytes, and dropping it recursively would overflow the stack.
    fn drop(&mut self) {
        let mut owned = Vec::new();
        self.give_children(&mut owned);
        while let Some(mut child) = owned.pop() {
            child.give_children(&mut owned);
        }
    }
}

impl Value {
    /// Moves the values this one alone holds (no other reference shares them) into `to`.
    fn give_children(&mut self, to: &mut Vec<Value>) {
        let none = || Value::None;
        match self {
            Value::Tuple(items) => {
                if let Some(items) = Rc::get_mut(items) {
                    to.extend(items.iter_mut().map(|v| std::mem::replace(v, none())));
                }
            }
            Value::List(items) => {
                if let Some(items) = Rc::get_mut(items) {
                    to.append(items.get_mut());
                }
            }
            Value::Dict(pairs) => {
                if let Some(pairs) = Rc::get_mut(pairs) {
                    to.extend(pairs.get_mut().drain(..).flat_map(|(k, v)| [k, v]));
                }
            }
            Value::Array(array) => {
                if let Some(array) = Rc::get_mut(array) {
                    to.append(&mut array.get_mut().values);
                }
            }
            _ => {}
        }
    }
}

/// A NumPy array: its shape and its elements in memory order.
#[derive(Clone, Debug, Default)]
pub struct Array {
    pub shape: Vec<usize>,
    pub values: Vec<Value>,
}

/// A NumPy dtype: `kind` as NumPy spells it (`f`, `i`, `u`, `b`, …), size in bytes, byte order.
#[derive(Clone, Debug)]
pub struct Dtype {
    pub kind: char,
    pub size: usize,
    pub big_endian: bool,
}

/// What went wrong, and the offset of the opcode in the (decompressed) pickle.
#[derive(Debug)]
pub struct PickleError {
    pub offset: u64,
    pub message: String,
}

impl std::fmt::Display for PickleError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.message)
    }
}

type Result<T> = std::result::Result<T, String>;

/// Reads one pickle from `input` and returns the object it holds.
pub fn read(input: impl BufRead) -> std::result::Result<Value, PickleError> {
    let mut machine = Machine {
        input: Input {
            inner: input,
            offset: 0,
        },
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    loop {
        let offset = machine.input.offset;
        let step = machine.input.byte().and_then(|op| machine.step(op));
        match step {
            Ok(true) => {}
            Ok(false) => {
                return machine
                    .pop()
                    .map_err(|message| PickleError { offset, message });
            }
            Err(message) => return Err(PickleError { offset, message }),
        }
    }
}

struct Input<R> {
    inner: R,
    offset: u64,
}

impl<R: BufRead> Input<R> {
    fn bytes(&mut self, n: u64) -> Result<Vec<u8>> {
        // Never allocates more than the file holds, whatever length it claims.
        let mut out = Vec::new();
        (self.inner.by_ref().take(n).read_to_end(&mut out)).map_err(|e| e.to_string())?;
        self.offset += out.len() as u64;
        match out.len() as u64 == n {
            true => Ok(out),
            false => Err("the pickle ends early (truncated?)".into()),
        }
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.bytes(N as u64)?.try_into().expect("N bytes"))
    }

    fn length(&mut self, width: usize) -> Result<u64> {
        let mut le = [0u8; 8];
        le[..width].copy_from_slice(&self.bytes(width as u64)?);
        Ok(u64::from_le_bytes(le))
    }

    /// A text argument of protocol 0, without its newline, as latin-1 (`UNICODE` writes the
    /// characters below 256 as their byte, every other one escaped).
    fn line(&mut self) -> Result<String> {
        let mut out = Vec::new();
        (self.inner.by_ref().take(crate::trec::MAX_LINE_BYTES))
            .read_until(b'\n', &mut out)
            .map_err(|e| e.to_string())?;
        self.offset += out.len() as u64;
        if out.pop() != Some(b'\n') {
            return Err("the pickle ends early (truncated?)".into());
        }
        Ok(out.into_iter().map(char::from).collect())
    }
}

struct Machine<R> {
    input: Input<R>,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: HashMap<u64, Value>,
}

impl<R: BufRead> Machine<R> {
    /// Runs one opcode; `false` at `STOP`.
    fn step(&mut self, op: u8) -> Result<bool> {
        match op {
            b'.' => return Ok(false),
            b'(' => self.marks.push(self.stack.len()),
            0x80 => drop(self.input.byte()?),       // PROTO
            0x95 => drop(self.input.bytes(8)?),     // FRAME: a hint only
            0x98 => {}                              // READONLY_BUFFER
            b'0' => drop(self.pop()?),              // POP
            b'1' => drop(self.pop_mark()?),         // POP_MARK
            b'2' => self.push(self.top()?.clone()), // DUP
            _ if self.constant(op)? => {}
            _ if self.collection(op)? => {}
            _ if self.memo_op(op)? => {}
            _ if self.call(op)? => {}
            _ => return Err(format!("opcode {op:#04x} is not one this reader takes")),
        }
        Ok(true)
    }

    /// Opcodes that push a constant.
    fn constant(&mut self, op: u8) -> Result<bool> {
        let input = &mut self.input;
        let value = match op {
            b'N' => Value::None,
            0x88 => Value::Bool(true),
            0x89 => Value::Bool(false),
            b'J' => Value::Int(i32::from_le_bytes(input.array()?).into()),
            b'K' => Value::Int(input.byte()?.into()),
            b'M' => Value::Int(u16::from_le_bytes(input.array()?).into()),
            0x8a | 0x8b => {
                let n = input.length(if op == 0x8a { 1 } else { 4 })?;
                Value::Int(long(&input.bytes(n)?)?)
            }
            b'G' => Value::Float(f64::from_be_bytes(input.array()?)),
            b'I' | b'L' | b'F' => text_number(op, &input.line()?)?,
            b'V' => Value::Str(raw_unicode_escape(&input.line()?).into()),
            b'X' | 0x8c | 0x8d => {
                let n = input.length(match op {
                    0x8c => 1,
                    b'X' => 4,
                    _ => 8,
                })?;
                let text = String::from_utf8(input.bytes(n)?).map_err(|_| "a str is not UTF-8")?;
                Value::Str(text.into())
            }
            // Python 2's str (BINSTRING, SHORT_BINSTRING) is bytes, as Python 3 reads it.
            b'B' | b'C' | 0x8e | 0x96 | b'T' | b'U' => {
                let width = match op {
                    b'C' | b'U' => 1,
                    b'B' | b'T' => 4,
                    _ => 8,
                };
                let n = input.length(width)?;
                Value::Bytes(input.bytes(n)?.into())
            }
            _ => return Ok(false),
        };
        self.push(value);
        Ok(true)
    }

    /// Opcodes that build or fill tuples, lists and dicts.
    fn collection(&mut self, op: u8) -> Result<bool> {
        match op {
            b')' => self.push(Value::Tuple(Rc::new([]))),
            0x85..=0x87 => {
                let mut items = Vec::new();
                for _ in 0x84..op {
                    items.push(self.pop()?);
                }
                items.reverse();
                self.push(Value::Tuple(items.into()));
            }
            b't' => {
                let items = self.pop_mark()?;
                self.push(Value::Tuple(items.into()));
            }
            b']' => self.push(Value::List(Rc::default())),
            b'l' => {
                let items = self.pop_mark()?;
                self.push(Value::List(Rc::new(RefCell::new(items))));
            }
            b'a' | b'e' => {
                let items = match op {
                    b'a' => vec![self.pop()?],
                    _ => self.pop_mark()?,
                };
                let Value::List(list) = self.top()? else {
                    return Err("APPEND to something not a list".into());
                };
                list.borrow_mut().extend(items);
            }
            b'}' => self.push(Value::Dict(Rc::default())),
            b'd' => {
                let pairs = pairs(self.pop_mark()?)?;
                self.push(Value::Dict(Rc::new(RefCell::new(pairs))));
            }
            b's' | b'u' => {
                let items = match op {
                    b's' => {
                        let value = self.pop()?;
                        vec![self.pop()?, value]
                    }
                    _ => self.pop_mark()?,
                };
                let Value::Dict(dict) = self.top()? else {
                    return Err("SETITEM on something not a dict".into());
                };
                dict.borrow_mut().extend(pairs(items)?);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Opcodes that put values in the memo and get them back.
    fn memo_op(&mut self, op: u8) -> Result<bool> {
        let input = &mut self.input;
        let (put, key) = match op {
            0x94 => (true, self.memo.len() as u64), // MEMOIZE
            b'p' => (true, text_index(&input.line()?)?),
            b'q' => (true, input.length(1)?),
            b'r' => (true, input.length(4)?),
            b'g' => (false, text_index(&input.line()?)?),
            b'h' => (false, input.length(1)?),
            b'j' => (false, input.length(4)?),
            _ => return Ok(false),
        };
        if put {
            let value = self.top()?.clone();
            self.memo.insert(key, value);
        } else {
            let value = self
                .memo
                .get(&key)
                .ok_or(format!("memo {key} was never put"))?;
            self.push(value.clone());
        }
        Ok(true)
    }

    /// `GLOBAL`, `STACK_GLOBAL`, `REDUCE` and `BUILD`: the calls NumPy's values pickle as.
    fn call(&mut self, op: u8) -> Result<bool> {
        match op {
            b'c' => {
                let (module, name) = (self.input.line()?, self.input.line()?);
                self.push(Value::Global(format!("{module}.{name}").into()));
            }
            0x93 => {
                let (name, module) = (self.pop()?, self.pop()?);
                let (Value::Str(module), Value::Str(name)) = (&module, &name) else {
                    return Err("STACK_GLOBAL of something not a str".into());
                };
                self.push(Value::Global(format!("{module}.{name}").into()));
            }
            b'R' => {
                let (arguments, callable) = (self.pop()?, self.pop()?);
                self.push(reduce(callable, arguments)?);
            }
            b'b' => {
                let state = self.pop()?;
                build(self.top()?, state)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn push(&mut self, value: Value) {
        self.stack.push(value);
    }

    fn pop(&mut self) -> Result<Value> {
        if self.marks.last() == Some(&self.stack.len()) {
            return Err("stack underflow (at a mark)".into());
        }
        self.stack.pop().ok_or_else(|| "stack underflow".into())
    }

    fn top(&self) -> Result<&Value> {
        self.stack.last().ok_or_else(|| "stack underflow".into())
    }

    fn pop_mark(&mut self) -> Result<Vec<Value>> {
        let at = self.marks.pop().ok_or("no mark to pop to")?;
        Ok(self.stack.split_off(at))
    }
}

/// `[k0, v0, k1, v1, …]` as pairs.
fn pairs(items: Vec<Value>) -> Result<Vec<(Value, Value)>> {
    if !items.len().is_multiple_of(2) {
        return Err("a dict's items are not key, value pairs".into());
    }
    let mut items = items.into_iter();
    Ok(std::iter::from_fn(|| Some((items.next()?, items.next()?))).collect())
}

/// A little-endian two's-complement int (`LONG1`, `LONG4`) that fits an `i64`.
fn long(bytes: &[u8]) -> Result<i64> {
    let negative = bytes.last().is_some_and(|b| b & 0x80 != 0);
    let fill = if negative { 0xff } else { 0 };
    let mut le = [fill; 8];
    let (low, high) = bytes.split_at(bytes.len().min(8));
    le[..low.len()].copy_from_slice(low);
    let value = i64::from_le_bytes(le);
    match high.iter().all(|&b| b == fill) && (value < 0) == negative {
        true => Ok(value),
        false => Err("an int wider than 64 bits".into()),
    }
}

/// Protocol 0's `INT` (`01`/`00` are `True`/`False`), `LONG` (`5L`) and `FLOAT`.
fn text_number(op: u8, text: &str) -> Result<Value> {
    let bad = || format!("`{text}` is not a number");
    match (op, text) {
        (b'I', "01") => Ok(Value::Bool(true)),
        (b'I', "00") => Ok(Value::Bool(false)),
        (b'F', _) => text.parse().map(Value::Float).map_err(|_| bad()),
        _ => (text.trim_end_matches('L').parse())
            .map(Value::Int)
            .map_err(|_| bad()),
    }
}

fn text_index(text: &str) -> Result<u64> {
    text.parse()
        .map_err(|_| format!("memo key `{text}` is not an integer"))
}

/// Protocol 0's `UNICODE` argument: `\uXXXX` and `\UXXXXXXXX` escapes, every other character
/// as it is.
fn raw_unicode_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let width = match rest.as_bytes().get(at + 1) {
            Some(b'u') => 4,
            Some(b'U') => 8,
            _ => 0,
        };
        let hex = rest.get(at + 2..at + 2 + width).filter(|_| width > 0);
        let escaped = hex.and_then(|h| u32::from_str_radix(h, 16).ok());
        match escaped.and_then(char::from_u32) {
            Some(c) => {
                out.push(c);
                rest = &rest[at + 2 + width..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The value of `callable(*arguments)`, for the callables NumPy's values pickle with.
fn reduce(callable: Value, arguments: Value) -> Result<Value> {
    let Value::Global(name) = &callable else {
        return Err("REDUCE of something not a callable".into());
    };
    let Value::Tuple(arguments) = &arguments else {
        return Err(format!("{name}: its arguments are not a tuple"));
    };
    let numpy = name
        .strip_prefix("numpy.core.")
        .or_else(|| name.strip_prefix("numpy._core."));
    match (&**name, numpy, &arguments[..]) {
        ("numpy.dtype", _, [code, ..]) => dtype(code),
        ("_codecs.encode", _, [Value::Str(text), ..]) => latin1(text),
        (_, Some("multiarray.scalar"), [Value::Dtype(dtype), Value::Bytes(raw)]) => {
            let mut values = elements(&dtype.borrow(), raw, 1)?;
            Ok(values.remove(0))
        }
        (_, Some("multiarray._reconstruct"), _) => Ok(Value::Array(Rc::default())),
        (_, Some("numeric._frombuffer"), [Value::Bytes(raw), Value::Dtype(dtype), shape, ..]) => {
            let array = array(shape, &dtype.borrow(), raw)?;
            Ok(Value::Array(Rc::new(RefCell::new(array))))
        }
        _ => Err(format!(
            "{name}(…) is not a call this reader evaluates (only NumPy scalars and arrays)"
        )),
    }
}

/// `BUILD`: the state of a NumPy dtype (its byte order) or array (shape, dtype, data).
fn build(object: &Value, state: Value) -> Result<()> {
    let Value::Tuple(state) = &state else {
        return Err("BUILD with a state that is not a tuple".into());
    };
    match (object, &state[..]) {
        (Value::Dtype(dtype), [_, Value::Str(order), ..]) => {
            dtype.borrow_mut().big_endian = &**order == ">";
            Ok(())
        }
        (Value::Array(array), [_, shape, Value::Dtype(dtype), _, data]) => {
            let raw = match data {
                Value::Bytes(raw) => raw,
                _ => return Err("a NumPy array of objects is not read".into()),
            };
            *array.borrow_mut() = self::array(shape, &dtype.borrow(), raw)?;
            Ok(())
        }
        _ => Err("BUILD of an object this reader does not build".into()),
    }
}

/// `numpy.dtype('f4', …)`, byte order native (little-endian) until its `BUILD` says otherwise.
fn dtype(code: &Value) -> Result<Value> {
    let code = match code {
        Value::Str(code) => code.to_string(),
        Value::Bytes(code) => String::from_utf8_lossy(code).into_owned(),
        _ => return Err("numpy.dtype of something not a str".into()),
    };
    let mut chars = code.chars();
    let kind = chars.next().ok_or("an empty NumPy dtype")?;
    let size = chars.as_str().parse().unwrap_or(0);
    Ok(Value::Dtype(Rc::new(RefCell::new(Dtype {
        kind,
        size,
        big_endian: false,
    }))))
}

/// `_codecs.encode(text, 'latin1')`: how protocols 0–2 write bytes.
fn latin1(text: &str) -> Result<Value> {
    let bytes: Option<Vec<u8>> = text.chars().map(|c| u8::try_from(c).ok()).collect();
    bytes
        .map(|b| Value::Bytes(b.into()))
        .ok_or_else(|| "_codecs.encode of a str beyond latin-1".into())
}

/// The array of `shape` (a tuple of sizes) whose elements are `raw`.
fn array(shape: &Value, dtype: &Dtype, raw: &[u8]) -> Result<Array> {
    let Value::Tuple(dims) = shape else {
        return Err("a NumPy array's shape is not a tuple".into());
    };
    let shape: Vec<usize> = (dims.iter())
        .map(|d| match d {
            Value::Int(n) => usize::try_from(*n).ok(),
            _ => None,
        })
        .collect::<Option<_>>()
        .ok_or("a NumPy array's shape is not a tuple of sizes")?;
    let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let values = elements(dtype, raw, count.ok_or("a NumPy array's shape overflows")?)?;
    Ok(Array { shape, values })
}

/// `count` elements of `dtype` from `raw`.
fn elements(dtype: &Dtype, raw: &[u8], count: usize) -> Result<Vec<Value>> {
    let name = format!("{}{}", dtype.kind, dtype.size);
    let numeric = matches!(
        (dtype.kind, dtype.size),
        ('f', 2 | 4 | 8) | ('i' | 'u', 1 | 2 | 4 | 8) | ('b', 1)
    );
    if !numeric {
        return Err(format!("NumPy dtype {name} is not a number"));
    }
    if raw.len() != count * dtype.size {
        let size = dtype.size;
        return Err(format!(
            "{} bytes for {count} values of {name} ({size} bytes each)",
            raw.len()
        ));
    }
    raw.chunks_exact(dtype.size)
        .map(|bytes| element(dtype, bytes))
        .collect()
}

fn element(dtype: &Dtype, bytes: &[u8]) -> Result<Value> {
    let mut le = [0u8; 8];
    le[..bytes.len()].copy_from_slice(bytes);
    if dtype.big_endian {
        le[..bytes.len()].reverse();
    }
    let bits = u64::from_le_bytes(le);
    let shift = 64 - 8 * bytes.len() as u32;
    Ok(match (dtype.kind, bytes.len()) {
        ('b', _) => Value::Bool(bits != 0),
        ('f', 2) => Value::Float(half::f16::from_bits(bits as u16).to_f64()),
        ('f', 4) => Value::Float(f32::from_bits(bits as u32).into()),
        ('f', _) => Value::Float(f64::from_bits(bits)),
        ('i', _) => Value::Int(((bits << shift) as i64) >> shift),
        _ => Value::Int(i64::try_from(bits).map_err(|_| format!("uint64 {bits} beyond int64"))?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/fixtures/pickle")
    }

    /// The value as `numpy_pickles.py` writes it to numpy.json.
    fn json(value: &Value) -> serde_json::Value {
        use serde_json::json;
        match value {
            Value::None => json!(null),
            Value::Bool(b) => json!(b),
            Value::Int(i) => json!(i),
            Value::Float(f) => json!(f),
            Value::Str(s) => json!(&**s),
            Value::Bytes(b) => json!(&**b),
            Value::Tuple(items) => items.iter().map(json).collect(),
            Value::List(items) => items.borrow().iter().map(json).collect(),
            Value::Array(array) => {
                let array = array.borrow();
                let values: Vec<_> = array.values.iter().map(json).collect();
                json!({ "shape": array.shape, "values": values })
            }
            Value::Dict(pairs) => (pairs.borrow().iter())
                .map(|(k, v)| match k {
                    Value::Str(k) => (k.to_string(), json(v)),
                    other => panic!("key {other:?}"),
                })
                .collect::<serde_json::Map<_, _>>()
                .into(),
            other => panic!("{other:?} left on the stack"),
        }
    }

    /// Equal, floats within a relative 1e-12 (serde_json may read a decimal to a neighbouring
    /// f64).
    fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        use serde_json::Value as J;
        match (a, b) {
            (J::Number(x), J::Number(y)) if x.is_f64() || y.is_f64() => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
            }
            (J::Array(x), J::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
            }
            (J::Object(x), J::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
            }
            _ => a == b,
        }
    }

    /// Every NumPy scalar and array kind, and Python's own values beside them, in each protocol
    /// Python writes, read as Python reads them.
    #[test]
    fn reads_numpy_values_in_every_protocol_as_python_does() {
        let expected: serde_json::Value =
            serde_json::from_slice(&std::fs::read(fixtures().join("numpy.json")).unwrap()).unwrap();
        for protocol in 0..=5 {
            let path = fixtures().join(format!("numpy-p{protocol}.pkl"));
            let value = read(std::io::BufReader::new(std::fs::File::open(&path).unwrap()))
                .unwrap_or_else(|e| panic!("protocol {protocol}: {e}"));
            let got = json(&value);
            assert!(same(&got, &expected), "protocol {protocol}: {got:#}");
        }
    }

    #[test]
    fn a_call_it_does_not_evaluate_or_a_cut_pickle_is_an_error_saying_where() {
        let call = b"\x80\x02c__main__\nScores\nq\x00)R.";
        let error = read(&call[..]).unwrap_err().to_string();
        assert!(
            error.contains("at byte 22: __main__.Scores(…) is not a call this reader evaluates"),
            "{error}"
        );
        let whole = std::fs::read(fixtures().join("numpy-p4.pkl")).unwrap();
        let error = read(&whole[..whole.len() / 2]).unwrap_err().to_string();
        assert!(error.contains("the pickle ends early"), "{error}");
        let wide = b"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.";
        let error = read(&wide[..]).unwrap_err().to_string();
        assert!(
            error.contains("at byte 2: an int wider than 64 bits"),
            "{error}"
        );
        // A length far beyond the file allocates nothing of that size.
        let claim = b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7fab";
        let error = read(&claim[..]).unwrap_err().to_string();
        assert!(error.contains("ends early"), "{error}");
    }

    /// A million nested lists (a few megabytes) are read and dropped without the stack
    /// growing with their depth.
    #[test]
    fn deeply_nested_values_do_not_overflow_the_stack() {
        let depth = 1_000_000;
        let mut bytes = vec![0x80, 4];
        bytes.extend(std::iter::repeat_n(b']', depth));
        bytes.extend(std::iter::repeat_n(b'a', depth - 1));
        bytes.push(b'.');
        let value = read(&bytes[..]).unwrap();
        assert!(matches!(value, Value::List(_)));
    }

    #[test]
    fn ints_of_every_width_keep_their_sign() {
        assert_eq!(long(&[]).unwrap(), 0);
        assert_eq!(long(&[0xff]).unwrap(), -1);
        assert_eq!(long(&[0x80, 0x00]).unwrap(), 128);
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00];
        assert_eq!(long(&max).unwrap(), i64::MAX);
        assert!(long(&[0, 0, 0, 0, 0, 0, 0, 0x80, 0x00]).is_err());
        assert_eq!(
            raw_unicode_escape(r"caf\u00e9 \U0001f600 a\b"),
            "café 😀 a\\b"
        );
    }
}
