//! A grammar's work computed ahead, off the engine's thread: as soon as a sequence's grammar
//! has advanced, the tokens it forces next (the jump-forward) and the mask after them start on
//! a small pool of threads, and run while the engine runs the batch's forward. The engine
//! takes them when it samples, waiting only until a deadline: a grammar whose masks (or forced
//! runs: a Lark sequence of 12k literals forces 63k tokens, 0.7 s of work) are slower than the
//! forward then delays its own sequence, not the whole batch; and its next jobs wait in the
//! pool's slow lane ([`Lane`]), so that it does not delay other grammars' either.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::{Duration, Instant};

use super::grammar::Matcher;
use super::mask_pool::{Job, Lane, MaskPool};

/// What a grammar finds at a position: the tokens it forces there (already committed; none
/// where the model has a choice, or with the jump-forward off), whether the answer is then
/// complete, and the mask after them (or its error; empty when complete).
struct Ahead {
    forced: Vec<i32>,
    complete: bool,
    mask: std::result::Result<Vec<u32>, String>,
}

/// A forced run and whether the answer is then complete, sent ahead of the mask after it.
type Run = (Vec<i32>, bool);

impl Ahead {
    /// What follows `m`'s position; the forced run also sent to `early` as soon as it is known
    /// (the engine may want it before the mask).
    fn compute(m: &mut Matcher, jump_forward: bool, early: Option<&Sender<Run>>) -> Ahead {
        let forced = if jump_forward { m.forced() } else { Vec::new() };
        let complete = m.is_complete();
        if let Some(tx) = early {
            let _ = tx.send((forced.clone(), complete));
        }
        let mask = if m.is_stopped() {
            Ok(Vec::new())
        } else {
            m.allowed()
        };
        Ahead {
            forced,
            complete,
            mask,
        }
    }

    /// The forced run and whether the answer is then complete, handed out once; `None` where
    /// nothing is forced.
    fn take_run(&mut self) -> Option<Run> {
        if self.forced.is_empty() && !self.complete {
            return None;
        }
        let forced = std::mem::take(&mut self.forced);
        Some((forced, std::mem::replace(&mut self.complete, false)))
    }

    fn lost() -> Ahead {
        Ahead {
            forced: Vec::new(),
            complete: false,
            mask: Err(JOB_LOST.to_string()),
        }
    }
}

/// What the engine does with a row of logits at a cursor's position.
pub enum Next<'a> {
    /// Mask it and sample.
    Mask(&'a [u32]),
    /// The row is not needed: append these tokens (the grammar forces them), the answer then
    /// `complete` or not.
    Forced(Vec<i32>, bool),
}

/// What a job gives back: the matcher, what it found and how long that took.
type Computed = (Matcher, Ahead, Duration);

/// Why a sequence's mask is missing when its job ended without one (a bug: llguidance turns
/// its own panics into errors).
const JOB_LOST: &str = "the output grammar: its mask computation failed";

/// A sequence's position in its output grammar, with what follows it (forced tokens, the
/// mask) computed ahead on a [`MaskPool`].
pub struct GrammarCursor {
    /// Here unless a job holds it.
    matcher: Option<Matcher>,
    /// Whether forced tokens are appended at once rather than sampled from one-token masks:
    /// after the first sampled token (the first is sampled, as a seeded request's draws
    /// have always been).
    jump_forward: bool,
    /// Whether a sampled token has been committed.
    committed: bool,
    /// The job computing what follows the current position.
    in_flight: Option<Receiver<Computed>>,
    /// Its forced run, sent ahead of the rest (with the jump-forward).
    early: Option<Receiver<Run>>,
    /// Whether that run was handed out already (the job's full answer repeats it).
    run_taken: bool,
    /// What follows the current position, once computed.
    ahead: Option<Ahead>,
    /// Where the next job waits: the slow lane after a slow one.
    lane: Lane,
    /// Stops the matcher's work (see [`Drop`]).
    stopper: Option<llguidance::CancellationHandle>,
}

/// A job still running for a sequence that is gone (finished, cancelled, failed) is stopped
/// mid-step, and leaves its thread to the others: a forced run can take long (0.7 s for a
/// Lark sequence of 12k literals), and a last token's next mask is never needed.
impl Drop for GrammarCursor {
    fn drop(&mut self) {
        if let (Some(_), Some(stopper)) = (&self.in_flight, &self.stopper) {
            stopper.cancel();
        }
    }
}

impl GrammarCursor {
    /// A cursor at `matcher`'s position; nothing started yet. Its first job waits in the slow
    /// lane where the grammar's opening mask was slow for an earlier sequence.
    pub fn new(matcher: Matcher, jump_forward: bool) -> GrammarCursor {
        let lane = matcher.opening_cost().map_or(Lane::Fast, Lane::after);
        let stopper = matcher.stopper();
        GrammarCursor {
            matcher: Some(matcher),
            jump_forward,
            committed: false,
            in_flight: None,
            early: None,
            run_taken: false,
            ahead: None,
            lane,
            stopper,
        }
    }

    /// Starts computing what follows the current position on `pool`, unless it is computed or
    /// being computed already, or the grammar has ended.
    pub fn prefetch(&mut self, pool: &MaskPool) {
        if self.ahead.is_some() || self.in_flight.is_some() {
            return;
        }
        if let Some(m) = self.matcher.take() {
            if m.is_stopped() {
                self.matcher = Some(m);
            } else {
                self.start(pool, m);
            }
        }
    }

    /// Whether what follows the current position is computed (without waiting for it).
    pub fn is_ready(&mut self) -> bool {
        self.settle(None);
        self.ahead.is_some()
    }

    /// What to do with the row of logits at the current position: computed here if no job
    /// was started, else waited for until `deadline` (`None` where it is not done by then).
    /// Forced tokens are handed out once; the mask after them stays for the next row.
    pub fn next_by(&mut self, deadline: Instant) -> Option<std::result::Result<Next<'_>, String>> {
        if self.ahead.is_none() && self.in_flight.is_none() {
            let jumps = self.jumps();
            if let Some(m) = self.matcher.as_mut() {
                self.ahead = Some(Ahead::compute(m, jumps, None));
            }
        }
        self.settle(Some(deadline.saturating_duration_since(Instant::now())));
        let ahead = self.ahead.as_mut()?;
        if let Some((forced, complete)) = ahead.take_run() {
            return Some(Ok(Next::Forced(forced, complete)));
        }
        Some(match &ahead.mask {
            Ok(mask) => Ok(Next::Mask(mask)),
            Err(e) => Err(e.clone()),
        })
    }

    /// The tokens forced at the current position, if they are known by `deadline` (waiting
    /// for the job until then), and whether the answer is then complete; the mask after them
    /// stays for the next row. `None` where nothing is forced, or it is not known yet.
    pub fn forced_by(&mut self, deadline: Instant) -> Option<Run> {
        self.settle(None);
        if self.ahead.is_none() && !self.run_taken {
            let early = self.early.take()?;
            let wait = deadline.saturating_duration_since(Instant::now());
            match receive(&early, Some(wait)) {
                Ok((forced, complete)) => {
                    if forced.is_empty() && !complete {
                        return None;
                    }
                    self.run_taken = true;
                    return Some((forced, complete));
                }
                Err(Gone::No) => self.early = Some(early),
                Err(Gone::Yes) => {}
            }
            return None;
        }
        self.ahead.as_mut()?.take_run()
    }

    /// Advances past `token` (sampled under the mask). Returns whether the answer is then
    /// complete (nothing may follow it).
    pub fn commit(&mut self, token: i32) -> std::result::Result<bool, String> {
        self.ahead = None;
        self.run_taken = false;
        self.committed = true;
        let m = self.matcher()?;
        m.commit(token)?;
        Ok(m.is_complete())
    }

    /// Queues a job computing what follows `matcher`'s position; with the jump-forward, its
    /// forced run comes on a channel of its own too, ahead of the rest.
    fn start(&mut self, pool: &MaskPool, matcher: Matcher) {
        let jump_forward = self.jumps();
        let opening = !self.committed;
        let (tx, rx) = mpsc::channel();
        let (early_tx, early_rx) = if jump_forward {
            let (t, r) = mpsc::channel();
            (Some(t), Some(r))
        } else {
            (None, None)
        };
        let job: Job = Box::new(move || {
            let mut matcher = matcher;
            let started = Instant::now();
            let ahead = Ahead::compute(&mut matcher, jump_forward, early_tx.as_ref());
            let took = started.elapsed();
            if opening {
                matcher.set_opening_cost(took);
            }
            let _ = tx.send((matcher, ahead, took));
        });
        pool.submit(self.lane, job);
        self.in_flight = Some(rx);
        self.early = early_rx;
    }

    /// The lane the next job waits in.
    pub fn lane(&self) -> Lane {
        self.lane
    }

    /// Whether the next job appends forced tokens.
    fn jumps(&self) -> bool {
        self.jump_forward && self.committed
    }

    /// The matcher, back from its job if one holds it (waiting for it).
    fn matcher(&mut self) -> std::result::Result<&mut Matcher, String> {
        self.settle(Some(Duration::MAX));
        self.matcher.as_mut().ok_or_else(|| JOB_LOST.to_string())
    }

    /// Takes the job's result if it is done, waiting for it at most `wait`.
    fn settle(&mut self, wait: Option<Duration>) {
        let Some(rx) = self.in_flight.as_ref() else {
            return;
        };
        match receive(rx, wait) {
            Ok((matcher, mut ahead, took)) => {
                self.lane = Lane::after(took);
                if std::mem::take(&mut self.run_taken) {
                    ahead.forced.clear();
                    ahead.complete = false;
                }
                self.matcher = Some(matcher);
                self.ahead = Some(ahead);
                self.in_flight = None;
                self.early = None;
            }
            // The job ended without an answer: its matcher is gone with it.
            Err(Gone::Yes) => {
                self.ahead = Some(Ahead::lost());
                self.in_flight = None;
                self.early = None;
            }
            Err(Gone::No) => {}
        }
    }
}

/// Whether a job's channel is closed (the job ended without an answer) or just not answered yet.
enum Gone {
    Yes,
    No,
}

/// What `rx` holds now (`wait` `None`) or within `wait`.
fn receive<T>(rx: &Receiver<T>, wait: Option<Duration>) -> std::result::Result<T, Gone> {
    match wait {
        None | Some(Duration::ZERO) => rx.try_recv().map_err(|e| match e {
            TryRecvError::Empty => Gone::No,
            TryRecvError::Disconnected => Gone::Yes,
        }),
        Some(d) => rx.recv_timeout(d).map_err(|e| match e {
            RecvTimeoutError::Timeout => Gone::No,
            RecvTimeoutError::Disconnected => Gone::Yes,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structured::grammar::tests::grammars;
    use crate::structured::Constraint;
    use crate::text::TextCodec;
    use std::sync::Arc;

    /// A cursor and a plain matcher of regex `rx` (the cursor with the jump-forward or not),
    /// and the fixture's codec.
    fn cursor_and_twin(rx: &str, jump_forward: bool) -> (GrammarCursor, Matcher, Arc<TextCodec>) {
        let (g, codec) = grammars();
        let compiled = g.compile(&Constraint::Regex(rx.into())).unwrap();
        let cursor = GrammarCursor::new(Matcher::new(&compiled), jump_forward);
        (cursor, Matcher::new(&compiled), codec)
    }

    /// The fixture's token of each character of `text` (given one by one).
    fn tokens(codec: &TextCodec, text: &str) -> Vec<i32> {
        text.chars()
            .map(|ch| {
                let t = codec.encode(&ch.to_string()).unwrap();
                assert_eq!(t.len(), 1, "{ch:?}");
                t[0]
            })
            .collect()
    }

    /// The mask `next_by` gives (none where it gives forced tokens or is late).
    fn mask(cursor: &mut GrammarCursor, deadline: Instant) -> Option<Vec<u32>> {
        match cursor.next_by(deadline)? {
            Ok(Next::Mask(m)) => Some(m.to_vec()),
            Ok(Next::Forced(..)) => None,
            Err(e) => panic!("{e}"),
        }
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    /// Masks computed ahead equal the matcher's own, position after position, and a cursor
    /// whose mask was never started computes it where it is asked for.
    #[test]
    fn masks_computed_ahead_are_the_matcher_s_own() {
        let pool = MaskPool::new(2).unwrap();
        let (mut cursor, mut twin, codec) = cursor_and_twin("ab[0-9]+c", false);
        let text = tokens(&codec, "ab73c");
        let last = text.len() - 1;
        for (n, token) in text.into_iter().enumerate() {
            if n % 2 == 0 {
                cursor.prefetch(&pool);
            }
            let want = twin.allowed().unwrap();
            assert_eq!(mask(&mut cursor, far()).unwrap(), want, "step {n}");
            assert!(
                want[token as usize / 32] >> (token % 32) & 1 == 1,
                "step {n}"
            );
            assert_eq!(cursor.commit(token).unwrap(), n == last, "step {n}");
            twin.commit(token).unwrap();
        }
    }

    /// With the jump-forward, what a grammar forces after a sampled token comes first, once,
    /// then the mask after it; forced text that completes the answer says so. The first token
    /// is sampled (under a mask of the one token allowed).
    #[test]
    fn forced_tokens_come_once_before_the_mask_after_them() {
        let pool = MaskPool::new(1).unwrap();
        let (mut cursor, mut twin, codec) = cursor_and_twin("[0-9]abc[0-9]de", true);
        cursor.prefetch(&pool);
        assert_eq!(mask(&mut cursor, far()).unwrap(), twin.allowed().unwrap());
        let seven = tokens(&codec, "7")[0];
        assert!(!cursor.commit(seven).unwrap());
        twin.commit(seven).unwrap();
        cursor.prefetch(&pool);
        let Some(Ok(Next::Forced(forced, false))) = cursor.next_by(far()) else {
            panic!("nothing forced after the first digit");
        };
        assert_eq!(codec.decode(&forced), "abc");
        for &t in &forced {
            twin.commit(t).unwrap();
        }
        assert_eq!(mask(&mut cursor, far()).unwrap(), twin.allowed().unwrap());
        assert!(!cursor.commit(seven).unwrap());
        cursor.prefetch(&pool);
        let Some(Ok(Next::Forced(forced, true))) = cursor.next_by(far()) else {
            panic!("the rest is forced and completes the answer");
        };
        assert_eq!(codec.decode(&forced), "de");
        // The run alone, ahead of the mask (before the step's forwards), then the mask after
        // it, the run not handed out again.
        let (mut cursor, mut twin, _) = cursor_and_twin("[0-9]xyz[0-9]", true);
        assert_eq!(cursor.forced_by(far()), None);
        assert!(!cursor.commit(seven).unwrap());
        twin.commit(seven).unwrap();
        cursor.prefetch(&pool);
        let (run, complete) = cursor.forced_by(far()).expect("a run after the digit");
        assert_eq!((codec.decode(&run).as_str(), complete), ("xyz", false));
        assert_eq!(cursor.forced_by(far()), None);
        for &t in &run {
            twin.commit(t).unwrap();
        }
        assert_eq!(mask(&mut cursor, far()).unwrap(), twin.allowed().unwrap());
    }

    /// Work not done by its deadline is `None` (the caller goes on), and arrives later; the
    /// matcher a job holds is waited for where it is needed.
    #[test]
    fn a_late_mask_is_none_until_it_is_done() {
        let pool = MaskPool::new(1).unwrap();
        let (release, held) = mpsc::channel::<()>();
        let hold: Job = Box::new(move || {
            let _ = held.recv();
        });
        pool.submit(Lane::Fast, hold);
        let (mut cursor, mut twin, codec) = cursor_and_twin("x+", false);
        cursor.prefetch(&pool);
        assert!(cursor
            .next_by(Instant::now() + Duration::from_millis(30))
            .is_none());
        assert!(!cursor.is_ready());
        drop(release);
        // The held job's end is signalled, then the cursor's.
        while !cursor.is_ready() {
            assert!(pool.wait_any(Duration::from_secs(60)));
        }
        assert_eq!(
            mask(&mut cursor, Instant::now()).unwrap(),
            twin.allowed().unwrap()
        );
        // Committing while the next mask is in flight waits for the matcher.
        let x = tokens(&codec, "x")[0];
        cursor.commit(x).unwrap();
        cursor.prefetch(&pool);
        cursor.commit(x).unwrap();
        twin.commit(x).unwrap();
        twin.commit(x).unwrap();
        assert_eq!(mask(&mut cursor, far()).unwrap(), twin.allowed().unwrap());
    }

    /// A Lark grammar of `n` literals in a row (`x0x1x2...`): each mask, and the run it forces
    /// after its first token, take long.
    fn literal_sequence(n: usize) -> Constraint {
        let literals: Vec<String> = (0..n).map(|i| format!("\"x{i}\"")).collect();
        Constraint::Lark(format!("start: {}\n", literals.join(" ")))
    }

    /// A grammar whose job took long (a Lark sequence of 6000 literals: milliseconds a mask)
    /// queues its next job in the pool's slow lane; a cursor starts in the fast one, unless an
    /// earlier cursor of the same grammar found its opening mask slow.
    #[test]
    fn a_slow_job_sends_the_next_to_the_slow_lane() {
        let (g, _) = grammars();
        let compiled = g.compile(&literal_sequence(6000)).unwrap();
        let mut cursor = GrammarCursor::new(Matcher::new(&compiled), false);
        assert_eq!(cursor.lane(), Lane::Fast);
        let pool = MaskPool::new(2).unwrap();
        cursor.prefetch(&pool);
        assert!(mask(&mut cursor, far()).is_some());
        assert_eq!(cursor.lane(), Lane::Slow);
        let next = GrammarCursor::new(Matcher::new(&compiled), false);
        assert_eq!(next.lane(), Lane::Slow);
        let other = g.compile(&Constraint::Regex("x+".into())).unwrap();
        assert_eq!(
            GrammarCursor::new(Matcher::new(&other), false).lane(),
            Lane::Fast
        );
    }

    /// A cursor dropped while its job runs stops the job mid-step: a long forced run (a Lark
    /// sequence of literals) ends early, and the pool's one thread takes the next job long
    /// before the run would have ended.
    #[test]
    fn a_dropped_cursor_stops_its_job() {
        let (g, _) = grammars();
        let compiled = g.compile(&literal_sequence(3000)).unwrap();
        let pool = MaskPool::new(1).unwrap();
        // A cursor past its first token (then the rest is forced), its job started.
        let past_first = || {
            let mut cursor = GrammarCursor::new(Matcher::new(&compiled), true);
            let first = mask(&mut cursor, far()).unwrap();
            let token = (0..first.len() * 32)
                .find(|t| first[t / 32] >> (t % 32) & 1 == 1)
                .unwrap();
            cursor.commit(token as i32).unwrap();
            cursor.prefetch(&pool);
            cursor
        };
        let mut whole = past_first();
        let t = Instant::now();
        let Some(Ok(Next::Forced(run, _))) = whole.next_by(far()) else {
            panic!("the rest is forced");
        };
        assert!(run.len() > 1000, "{}", run.len());
        let alone = t.elapsed();
        let stopped = past_first();
        let t = Instant::now();
        drop(stopped);
        let (tx, rx) = mpsc::channel();
        pool.submit(
            Lane::Fast,
            Box::new(move || {
                let _ = tx.send(());
            }),
        );
        rx.recv_timeout(Duration::from_secs(60)).unwrap();
        let stopped = t.elapsed();
        assert!(
            stopped < alone / 2,
            "stopped after {stopped:?}, the whole run {alone:?}"
        );
    }
}
