//! One page of a listing that grows with use (an intent's history, a user's bookings), and the
//! bound on its size.
//!
//! Such listings are read a page at a time so that no request's work, answer or store reads
//! grow without bound. A page is keyed: its cursor is the key of the last item it returned and
//! the next page starts strictly after it, so a page is stable under concurrent appends (a new
//! record lands on a later page, never shifts one already read). Adapters read one item more
//! than the page holds ([`Page::from_overread`]): the extra item says there is a next page, so
//! the last page never hands out a cursor that leads to an empty one.

use std::num::NonZeroU16;

/// How many items a page holds: `1..=`[`PageSize::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSize(NonZeroU16);

impl PageSize {
    /// The largest page any listing returns; it keeps one DynamoDB `Query` well under its 1 MB
    /// page for every item kind the listings hold.
    pub const MAX: u16 = 100;

    /// `None` outside `1..=MAX`.
    pub const fn new(items: u16) -> Option<Self> {
        match NonZeroU16::new(items) {
            Some(n) if items <= Self::MAX => Some(PageSize(n)),
            _ => None,
        }
    }

    pub const fn get(self) -> usize {
        self.0.get() as usize
    }

    /// How many items an adapter reads for one page: one more than it holds.
    pub const fn overread(self) -> usize {
        self.get() + 1
    }
}

/// Up to one page of items in key order, and the cursor of the next page if there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T, C> {
    pub items: Vec<T>,
    /// The key of the last item, when more items follow it; `None` on the last page.
    pub next: Option<C>,
}

impl<T, C> Page<T, C> {
    /// A page from items read in key order after the previous cursor, at most
    /// [`PageSize::overread`] of them: when the extra item was read it is dropped and the page's
    /// last key becomes the cursor.
    ///
    /// # Panics
    /// If more than `size.overread()` items were read: the adapter broke its read bound.
    pub fn from_overread(mut items: Vec<T>, size: PageSize, key: impl Fn(&T) -> C) -> Self {
        assert!(
            items.len() <= size.overread(),
            "a page read {} items, more than its bound {}",
            items.len(),
            size.overread()
        );
        if items.len() <= size.get() {
            return Page { items, next: None };
        }
        items.truncate(size.get());
        let next = items.last().map(key);
        Page { items, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bounded() {
        assert_eq!(PageSize::new(0), None);
        assert_eq!(PageSize::new(PageSize::MAX + 1), None);
        assert_eq!(PageSize::new(PageSize::MAX).map(PageSize::get), Some(100));
        assert_eq!(PageSize::new(3).map(PageSize::overread), Some(4));
    }

    #[test]
    fn the_extra_item_makes_the_cursor() {
        let size = PageSize::new(2).unwrap();
        let full = Page::from_overread(vec![1, 2, 3], size, |n| *n);
        assert_eq!(full.items, vec![1, 2]);
        assert_eq!(full.next, Some(2));
        let exact = Page::from_overread(vec![1, 2], size, |n| *n);
        assert_eq!((exact.items, exact.next), (vec![1, 2], None));
        let empty = Page::from_overread(Vec::<u32>::new(), size, |n| *n);
        assert_eq!((empty.items.len(), empty.next), (0, None));
    }

    #[test]
    #[should_panic(expected = "more than its bound")]
    fn reading_past_the_bound_is_a_bug() {
        let size = PageSize::new(1).unwrap();
        let _ = Page::from_overread(vec![1, 2, 3], size, |n| *n);
    }
}
