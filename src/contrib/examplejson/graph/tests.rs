use super::*;

use super::GUIDE_SEED as SEED;

fn err(text: &str) -> String {
    let e = Graph::parse(text).expect_err("text should be rejected");
    assert_eq!(e.kind, "ValueError");
    e.message.clone()
}

#[test]
fn parses_the_guide_subgraph() {
    let g = Graph::parse(SEED).unwrap();
    assert_eq!(g.subgraph_names(), vec!["subgraph_0".to_owned()]);
    assert_eq!(g.text(), SEED);
    let s = g.subgraph("subgraph_0").unwrap();
    assert_eq!(s.name(), "subgraph_0");
    assert_eq!(s.num_inputs(), 4);
    assert_eq!(s.input_shape(3), Some(&[10usize, 10][..]));
    assert_eq!(s.input_shape(4), None);
    assert_eq!(s.output_shape(), &[10, 10]);
    let nodes = s.nodes();
    assert_eq!(nodes.len(), 7);
    assert_eq!(nodes[2].kind, NodeKind::Input { arg: 2 });
    assert_eq!(
        nodes[5].kind,
        NodeKind::Compute {
            op: Op::Sub,
            operands: vec![4, 2]
        }
    );
    assert_eq!((nodes[6].id, nodes[6].line), (6, 8));
    assert!(g.subgraph("subgraph_1").is_none());
}

#[test]
fn parses_tvm_test_text_with_two_subgraphs_and_aliases() {
    // tests/python/relay/test_external_runtime.py restarts ids per subgraph and has no
    // trailing newline; Relay op names are aliases.
    let text = "json_rt_0\ninput 0 10 10\ninput 1 10 10\nadd 2 inputs: 0 1 shape: 10 10\n\
                \r\n   \njson_rt_1\ninput 0 10\ninput 1 10\r\nsubtract 2 inputs: 0 1 shape: 10\n\
                multiply 3 inputs: 2 2 shape: 10\ndivide 7 inputs: 3 0 shape: 10\n\
                relu 9 inputs: 7 shape: 10";
    let g = Graph::parse(text).unwrap();
    assert_eq!(g.subgraph_names(), vec!["json_rt_0", "json_rt_1"]);
    let s = g.subgraph("json_rt_1").unwrap();
    let ops: Vec<Op> = s
        .nodes()
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::Compute { op, .. } => Some(*op),
            NodeKind::Input { .. } => None,
        })
        .collect();
    assert_eq!(ops, vec![Op::Sub, Op::Mul, Op::Div, Op::Relu]);
    assert_eq!(s.output_shape(), &[10]);
    assert_eq!(g.subgraphs().len(), 2);
}

#[test]
fn accepts_broadcasting_and_scalars() {
    let text = "sg\ninput 0 4 3\ninput 1 3\ninput 2\ninput 3 4 1\n\
                add 4 inputs: 0 1 shape: 4 3\nmul 5 inputs: 4 2 shape: 4 3\n\
                maximum 6 inputs: 3 1 shape: 4 3\nminimum 7 inputs: 2 2 shape:\n\
                sub 8 inputs: 6 5 shape: 4 3\n";
    let g = Graph::parse(text).unwrap();
    let s = g.subgraph("sg").unwrap();
    assert_eq!(s.input_shape(2), Some(&[][..]));
    assert_eq!(s.nodes()[7].shape, Vec::<usize>::new());
}

#[test]
fn op_names_round_trip() {
    for op in [
        Op::Add,
        Op::Sub,
        Op::Mul,
        Op::Div,
        Op::Maximum,
        Op::Minimum,
        Op::Relu,
    ] {
        assert_eq!(Op::from_name(op.name()), Some(op));
        assert_eq!(op.arity(), if op == Op::Relu { 1 } else { 2 });
    }
    assert_eq!(Op::from_name("conv2d"), None);
}

#[test]
fn rejects_unknown_op_with_name_and_line() {
    let m = err("subgraph_0\ninput 0 2\nconv2d 1 inputs: 0 shape: 2\n");
    assert_eq!(
        m,
        "ExampleJSON line 3: unknown op 'conv2d' (known ops: add, sub, mul, div, maximum, \
         minimum, relu)"
    );
}

#[test]
fn rejects_syntax_errors_with_line() {
    let cases: &[(&str, &str)] = &[
        (
            "s\ninput 0 2\nadd 1 0 0 shape: 2\n",
            "ExampleJSON line 3: expected 'inputs:' after 'add 1'",
        ),
        (
            "s\ninput 0 2\nadd 1 inputs: 0 0 2\n",
            "ExampleJSON line 3: expected 'shape:' after the operand ids",
        ),
        ("s\ninput x 2\n", "ExampleJSON line 2: bad node id 'x'"),
        ("s\ninput -1 2\n", "ExampleJSON line 2: bad node id '-1'"),
        ("s\ninput\n", "ExampleJSON line 2: missing node id"),
        ("s\ninput 0 2\nadd\n", "ExampleJSON line 3: missing node id"),
        (
            "s\ninput 0 2\nadd 1 inputs: 0 zero shape: 2\n",
            "ExampleJSON line 3: bad operand id 'zero'",
        ),
        (
            "s\ninput 0 2 x\n",
            "ExampleJSON line 2: bad dimension 'x' (expected a positive integer)",
        ),
        (
            "s\ninput 0 2\nadd 1 inputs: 0 0 shape: -2\n",
            "ExampleJSON line 3: bad dimension '-2' (expected a positive integer)",
        ),
        (
            "s\n42\n",
            "ExampleJSON line 2: expected a subgraph name, 'input' or an op, found '42'",
        ),
        (
            "s\ninput 0 2\nrelu 1 inputs: 0 0 shape: 2\n",
            "ExampleJSON line 3: node 1 (relu) takes 1 operand(s), got 2",
        ),
        (
            "s\ninput 0 2\nadd 1 inputs: 0 shape: 2\n",
            "ExampleJSON line 3: node 1 (add) takes 2 operand(s), got 1",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(&err(text), want, "for {text:?}");
    }
}

#[test]
fn rejects_bad_ids() {
    assert_eq!(
        err("s\ninput 0 2\nadd 1 inputs: 0 5 shape: 2\n"),
        "ExampleJSON line 3: node 1 refers to node 5, which is not defined before it in \
         subgraph 's'"
    );
    // A node cannot read itself.
    assert_eq!(
        err("s\ninput 0 2\nadd 1 inputs: 0 1 shape: 2\n"),
        "ExampleJSON line 3: node 1 refers to node 1, which is not defined before it in \
         subgraph 's'"
    );
    assert_eq!(
        err("s\ninput 0 2\ninput 0 2\n"),
        "ExampleJSON line 3: duplicate node id 0 in subgraph 's'"
    );
    assert_eq!(
        err("s\ninput 3 2\ninput 5 2\nadd 4 inputs: 3 5 shape: 2\n"),
        "ExampleJSON line 4: node id 4 is out of order (ids must increase; previous id 5)"
    );
    // Ids are per subgraph: the second subgraph cannot see the first one's nodes.
    assert_eq!(
        err("a\ninput 0 2\nrelu 1 inputs: 0 shape: 2\nb\ninput 5 2\nrelu 6 inputs: 1 shape: 2\n"),
        "ExampleJSON line 6: node 6 refers to node 1, which is not defined before it in \
         subgraph 'b'"
    );
}

#[test]
fn rejects_structure_errors() {
    assert_eq!(
        err("input 0 2\n"),
        "ExampleJSON line 1: 'input' statement before any subgraph name line"
    );
    assert_eq!(
        err("\n\nadd 1 inputs: 0 0 shape: 2\n"),
        "ExampleJSON line 3: 'add' statement before any subgraph name line"
    );
    assert_eq!(
        err("a\nb\ninput 0 1\nrelu 1 inputs: 0 shape: 1\n"),
        "ExampleJSON line 1: subgraph 'a' has no op node"
    );
    assert_eq!(
        err("a\ninput 0 1\nrelu 1 inputs: 0 shape: 1\nb\ninput 0 1\n"),
        "ExampleJSON line 4: subgraph 'b' has no op node"
    );
    assert_eq!(
        err("a\ninput 0 1\nrelu 1 inputs: 0 shape: 1\ninput 2 1\n"),
        "ExampleJSON line 1: subgraph 'a' ends with an input; its last statement must be an \
         op (the result)"
    );
    assert_eq!(
        err("a\ninput 0 1\nrelu 1 inputs: 0 shape: 1\na\ninput 0 1\nrelu 1 inputs: 0 shape: 1\n"),
        "ExampleJSON line 4: subgraph 'a' is defined twice (first at line 1)"
    );
    assert_eq!(err(""), "ExampleJSON text declares no subgraph");
    assert_eq!(err(" \n\n"), "ExampleJSON text declares no subgraph");
}

#[test]
fn rejects_absurd_shapes() {
    assert_eq!(
        err("s\ninput 0 10 0\n"),
        "ExampleJSON line 2: dimension 0 is out of range (1 to 2^31)"
    );
    assert_eq!(
        err("s\ninput 0 4294967296\n"),
        "ExampleJSON line 2: dimension 4294967296 is out of range (1 to 2^31)"
    );
    assert_eq!(
        err("s\ninput 0 99999999999999999999999\n"),
        "ExampleJSON line 2: bad dimension '99999999999999999999999' (expected a positive \
         integer)"
    );
    assert_eq!(
        err("s\ninput 0 65536 65536\n"),
        "ExampleJSON line 2: shape [65536, 65536] has more than 2^31 elements"
    );
    let rank33 = format!("s\ninput 0{}\n", " 1".repeat(33));
    assert_eq!(
        err(&rank33),
        "ExampleJSON line 2: shape has 33 dimensions, more than 32"
    );
    // Exactly 2^31 elements is allowed: nothing is allocated at parse time.
    assert!(Graph::parse("s\ninput 0 32768 65536\nrelu 1 inputs: 0 shape: 32768 65536\n").is_ok());
}

#[test]
fn rejects_operands_that_do_not_broadcast() {
    assert_eq!(
        err("s\ninput 0 10 10\ninput 1 3\nadd 2 inputs: 0 1 shape: 10 10\n"),
        "ExampleJSON line 4: node 2 (add): operand shape(s) [10, 10] and [3] do not broadcast \
         to the declared shape [10, 10]"
    );
    // Operands broadcast, but not to the declared shape.
    assert_eq!(
        err("s\ninput 0 10\ninput 1 10\nmul 2 inputs: 0 1 shape: 5 10\n"),
        "ExampleJSON line 4: node 2 (mul): operand shape(s) [10] and [10] do not broadcast to \
         the declared shape [5, 10]"
    );
    assert_eq!(
        err("s\ninput 0 4 1\nrelu 1 inputs: 0 shape: 4 3\n"),
        "ExampleJSON line 3: node 1 (relu): operand shape(s) [4, 1] do not broadcast to the \
         declared shape [4, 3]"
    );
}

#[test]
fn rejects_huge_broadcast_intermediates() {
    // Two 2^30-element broadcast intermediates feeding a 2^31-element result: 2^31 + 2^31
    // scratch elements would be needed.
    let text = "s\ninput 0 2 1 1\ninput 1 1 32768 32768\n\
                add 2 inputs: 1 1 shape: 1 32768 32768\nmul 3 inputs: 2 2 shape: 1 32768 32768\n\
                sub 4 inputs: 3 0 shape: 2 32768 32768\n\
                input 5 1 1 1\nadd 6 inputs: 1 5 shape: 1 32768 32768\n\
                add 7 inputs: 4 6 shape: 2 32768 32768\n";
    assert_eq!(
        err(text),
        "ExampleJSON subgraph 's': its broadcast intermediates need 3221225472 elements, more \
         than the limit 2^31"
    );
}
