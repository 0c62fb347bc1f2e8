//! The service-time hook (`MemoryBackend::set_service_time`): a call takes the time drawn for
//! it, is applied halfway through, and a backend without the hook never yields.

use seatgate::domain::{Action, ActionKind, Millis, SeatId, UserId};
use seatgate::ports::Actions;
use seatgate_memory::runtime::TokioClock;
use seatgate_memory::{MemoryBackend, MemoryConfig, Op, ServiceTime};
use std::sync::Arc;
use std::time::Duration;

const START: Millis = Millis(1_767_225_600_000);

/// Every write 40 ms, every read 10 ms.
#[derive(Debug)]
struct Fixed;

impl ServiceTime for Fixed {
    fn draw(&self, op: Op) -> Duration {
        Duration::from_millis(if op.is_write() { 40 } else { 10 })
    }
}

fn action(n: u32) -> Action {
    Action::prepare(
        UserId::parse(&format!("user-{n}")).unwrap(),
        ActionKind::ReserveSeat,
        SeatId::parse("A-12").unwrap(),
        START,
        Duration::from_secs(300),
    )
}

#[tokio::test(start_paused = true)]
async fn a_timed_call_takes_its_time_and_lands_halfway() {
    let clock = Arc::new(TokioClock::starting_at(START));
    let store = MemoryBackend::new(clock.clone(), MemoryConfig::default());
    assert!(store.set_service_time(Arc::new(Fixed)));
    // Set once: a run's timing cannot change under it.
    assert!(!store.set_service_time(Arc::new(Fixed)));
    let a = action(1);
    let started = tokio::time::Instant::now();
    let writer = {
        let (store, a) = (store.clone(), a.clone());
        tokio::spawn(async move { store.put_action(&a).await })
    };
    // A read lands 5 ms after it starts: started 14 ms in, it lands before the write (20 ms)
    // and sees nothing; started 24 ms in, it lands after and sees the action.
    tokio::time::sleep(Duration::from_millis(14)).await;
    assert_eq!(store.get_action(&a.action_id).await.unwrap(), None);
    assert_eq!(started.elapsed(), Duration::from_millis(24));
    assert!(store.get_action(&a.action_id).await.unwrap().is_some());
    // 34 ms in: the write has landed, its answer is still on its way back.
    assert!(!writer.is_finished());
    writer.await.unwrap().unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(40));
}

#[tokio::test(start_paused = true)]
async fn without_the_hook_a_call_takes_no_time() {
    let clock = Arc::new(TokioClock::starting_at(START));
    let store = MemoryBackend::new(clock, MemoryConfig::default());
    let started = tokio::time::Instant::now();
    for n in 0..10 {
        store.put_action(&action(n)).await.unwrap();
    }
    assert_eq!(started.elapsed(), Duration::ZERO);
}
