//! Credentials: put, replace, get.

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;

pub async fn credentials_put_replace_get(h: &Harness) {
    let user = new_user();
    let other = new_user();
    assert_eq!(h.credentials.credential(&user).await.unwrap(), None);
    h.credentials
        .put_credential(&user, &Secret::new("first-token"))
        .await
        .unwrap();
    assert_eq!(
        h.credentials.credential(&user).await.unwrap(),
        Some(Secret::new("first-token"))
    );
    h.credentials
        .put_credential(&user, &Secret::new("second-token"))
        .await
        .unwrap();
    assert_eq!(
        h.credentials.credential(&user).await.unwrap(),
        Some(Secret::new("second-token"))
    );
    assert_eq!(h.credentials.credential(&other).await.unwrap(), None);
}
