//! A mutex with priority inheritance, for the daemon's state shared by its two threads.
//!
//! The agent's commands are taken by a real-time thread, the kernel's reports by a normal
//! one (main.rs). Without inheritance a command would wait for the lock as long as the
//! normal thread, holding it, waits for a CPU (a 30 Gbit/s flow keeps both busy); with
//! PTHREAD_PRIO_INHERIT the holder runs at the waiter's priority until it lets go.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

pub struct PiMutex<T> {
    // boxed: a pthread mutex must not move once initialised
    raw: Box<UnsafeCell<libc::pthread_mutex_t>>,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, which holds the lock; T may hold Rc and
// Cell (the daemon's state is written for one thread at a time), which is sound as long as
// nothing borrowed from it is kept beyond the guard, which the guard's lifetime enforces.
unsafe impl<T> Send for PiMutex<T> {}
unsafe impl<T> Sync for PiMutex<T> {}

impl<T> PiMutex<T> {
    pub fn new(data: T) -> std::io::Result<PiMutex<T>> {
        let raw = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        // SAFETY: attr is initialised before use and destroyed after; raw lives in a box.
        unsafe {
            let mut attr = std::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
            check(libc::pthread_mutexattr_init(attr.as_mut_ptr()))?;
            let r = check(libc::pthread_mutexattr_setprotocol(attr.as_mut_ptr(), libc::PTHREAD_PRIO_INHERIT))
                .and_then(|_| check(libc::pthread_mutex_init(raw.get(), attr.as_ptr())));
            libc::pthread_mutexattr_destroy(attr.as_mut_ptr());
            r?;
        }
        Ok(PiMutex { raw, data: UnsafeCell::new(data) })
    }

    pub fn lock(&self) -> PiGuard<'_, T> {
        // SAFETY: an initialised mutex; a PI mutex's lock fails only on a deadlock (EDEADLK,
        // not with the default type) or a corrupted one: both bugs here
        let r = unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        assert_eq!(r, 0, "pthread_mutex_lock: {}", std::io::Error::from_raw_os_error(r));
        PiGuard { mutex: self }
    }
}

impl<T> Drop for PiMutex<T> {
    fn drop(&mut self) {
        // SAFETY: no guard can outlive the mutex
        unsafe { libc::pthread_mutex_destroy(self.raw.get()) };
    }
}

fn check(r: libc::c_int) -> std::io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(r))
    }
}

pub struct PiGuard<'a, T> {
    mutex: &'a PiMutex<T>,
}

impl<T> Deref for PiGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the lock is held
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T> DerefMut for PiGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the lock is held, and this guard is its only holder
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T> Drop for PiGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: locked by this guard, on this thread
        unsafe { libc::pthread_mutex_unlock(self.mutex.raw.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn two_threads_add_under_the_lock_and_lose_nothing() {
        let m = Arc::new(PiMutex::new(0u64).unwrap());
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..100_000 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 200_000);
    }
}
